"""Stubborn Lexical Bias in Data and Models (Serrano et al., ACL 2023 Findings): z-scored lexical features, the
exact permutation test for model bias, the reweighting q and Err(q), the BiLSTM control, and the paper's tables."""
