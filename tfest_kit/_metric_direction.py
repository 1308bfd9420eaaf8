"""Whether higher or lower values of an eval metric are better, read from its name.

Shared by ``early_stopping`` and ``best_exporter``, whose ``mode="auto"`` must agree: a model
kept as the best export should be the one early stopping counted as an improvement.
"""

from __future__ import annotations

import re

from tfest_kit._tf import tf

__all__ = ["higher_is_better"]

# mode="auto" compares whole words of the name, never substrings: "map" (mean average
# precision) is inside "mape" and "heatmap_mse", "r2" inside "layer2_mse".
_MAX_WORDS = frozenset(
    {"acc", "accuracy", "auc", "auroc", "auprc", "prauc", "precision", "recall", "f1", "f2"}
    | {"fscore", "f1score", "fbeta", "specificity", "sensitivity", "tpr", "tnr", "mcc", "kappa"}
    | {"map", "ndcg", "mrr", "hits", "iou", "miou", "dice", "jaccard"}  # ranking, overlap
    | {"r2", "rsquared", "pearson", "spearman", "correlation"}  # fit
    | {"bleu", "rouge", "rougel", "meteor", "psnr", "ssim"}  # text and image quality
)
# A word naming an error wins over a max word: "accuracy_loss" or "precision_error" is lower-
# is-better however it is spelled.
_ERROR_WORDS = frozenset(
    {"loss", "error", "err", "mse", "mae", "mape", "smape", "wmape", "rmse", "msle", "rmsle"}
    | {"logloss", "crossentropy", "xent", "nll", "perplexity", "hinge", "distance", "cost"}
)


def _name_words(monitor: str) -> set:
    """Returns the words of a metric name, split at everything but letters and digits.

    Adjacent words are also joined, so ``f_1``, ``f1_score`` and ``top_5`` read as ``f1``,
    ``f1score`` and ``top5``; and each word is also read without trailing digits, so ``acc1``,
    ``map50`` (``mAP50-95``) and ``mse2`` read as ``acc``, ``map`` and ``mse`` too.
    """
    words = [word for word in re.split(r"[^0-9a-z]+", monitor.lower()) if word]
    joined = set(words) | {a + b for a, b in zip(words, words[1:])}
    # A top-k or IoU-threshold suffix (acc5, map50) still names the metric; a word of digits
    # alone ("95") strips to nothing.
    return joined | ({w.rstrip("0123456789") for w in joined} - {""})


def higher_is_better(monitor: str, mode: str, who: str) -> bool:
    """Returns True when higher values of ``monitor`` are better.

    ``mode="auto"`` picks max when a word of the name is accuracy-, AUC-, precision-, recall-
    or F1-like (or a ranking, overlap, fit or text / image quality score: mAP, NDCG, IoU, R²,
    BLEU, SSIM, top-k …) and no word names an error (loss, MSE, MAPE…), and logs the choice
    once, as ``who``, so that a wrong guess is visible before it matters: a name it does not
    know is taken as lower-is-better with a warning.

    Raises:
      ValueError: if ``mode`` is not ``"min"``, ``"max"`` or ``"auto"``.
    """
    if mode not in ("min", "max", "auto"):
        raise ValueError(f'`mode` must be "min", "max" or "auto". Got: {mode!r}')
    if mode != "auto":
        return mode == "max"
    words = _name_words(monitor)
    top_k = any(re.fullmatch(r"top(\d+|k)", word) for word in words)  # top-5 accuracy
    higher = bool(words & _MAX_WORDS or top_k) and not words & _ERROR_WORDS
    if higher or words & _ERROR_WORDS:
        tf.logging.info(
            '%s: mode="auto" takes %s values of "%s" as better; pass mode="%s" if that is wrong.',
            who,
            "higher" if higher else "lower",
            monitor,
            "min" if higher else "max",
        )
    else:
        # A guess: at INFO (hidden at TensorFlow's default level) a metric where higher is
        # better would silently keep the worst model.
        tf.logging.warning(
            '%s: mode="auto" does not know the metric "%s" and takes lower values as better, '
            'as for a loss; pass mode="max" if higher is better (or mode="min" to say so).',
            who,
            monitor,
        )
    return higher
