"""Infilling: the transformer that fills masked steps, its data, metrics, evaluation and pictures."""
