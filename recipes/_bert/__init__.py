"""Private building blocks of ``recipes.bert_classifier``.

``tokenization`` (WordPiece from ``vocab.txt``), ``processors`` (GLUE TSV layouts and the built-in
sample task), ``modeling`` (a transformer encoder with the released BERT variable names),
``features`` (examples -> cached TFRecords -> ``input_fn``) and ``sample_data`` (a generated tiny
config, vocabulary and sentence-pair task).
"""
