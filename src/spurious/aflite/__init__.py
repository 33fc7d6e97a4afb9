"""AFLite (Le Bras et al., ICML 2020): predictability scores and the greedy filter, the synthetic experiment
(Table 7), filtering text datasets (Tables 3-4) and out-of-distribution evaluation (Tables 1-2)."""
