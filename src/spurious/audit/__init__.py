"""`spurious audit`: which shortcuts a user's own model takes, with evidence from the four papers' diagnostics."""
