"""Whether higher or lower values of an eval metric are better, read from its name.

Shared by ``early_stopping`` and ``best_exporter``, so both agree on what an improvement is.
"""

import re

from tfest_kit._tf import tf

# Whole words, never substrings: "map" is inside "mape" and "heatmap_mse", "r2" in "layer2_mse".
_MAX_WORDS = frozenset(
    "acc accuracy auc auroc auprc prauc precision recall f1 f2 fscore f1score fbeta specificity "
    "sensitivity tpr tnr mcc kappa map ndcg mrr hits iou miou dice jaccard r2 rsquared pearson "
    "spearman correlation bleu rouge rougel meteor psnr ssim".split()
)
# A word naming an error wins: "accuracy_loss" is lower-is-better.
_ERROR_WORDS = frozenset(
    "loss error err mse mae mape smape wmape rmse msle rmsle logloss crossentropy xent nll "
    "perplexity hinge distance cost".split()
)


def higher_is_better(monitor: str, mode: str, who: str) -> bool:
    """Whether higher values of ``monitor`` are better; ``mode="auto"`` reads its words.

    Adjacent words are also joined and trailing digits stripped (``f_1``, ``top_5``, ``acc5``);
    a name it does not know is taken as lower-is-better, with a warning naming ``who``.
    """
    if mode not in ("min", "max", "auto"):
        raise ValueError(f'`mode` must be "min", "max" or "auto". Got: {mode!r}')
    if mode != "auto":
        return mode == "max"
    words = [word for word in re.split(r"[^0-9a-z]+", monitor.lower()) if word]
    words = set(words) | {a + b for a, b in zip(words, words[1:])}
    words |= {word.rstrip("0123456789") for word in words} - {""}
    top_k = any(re.fullmatch(r"top(\d+|k)", word) for word in words)  # top-5 accuracy
    higher = bool(words & _MAX_WORDS or top_k) and not words & _ERROR_WORDS
    if not higher and not words & _ERROR_WORDS:  # a higher-is-better one would keep the worst
        tf.logging.warning(
            f'{who}: mode="auto" does not know the metric "{monitor}" and takes lower values as '
            'better; pass mode="max" if higher is better (or mode="min" to say so).'
        )
    return higher
