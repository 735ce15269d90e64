"""Evaluation: the Evaluator, the metrics (sacreBLEU, chrF) and EVALB-exact F1."""
