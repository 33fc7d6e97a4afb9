"""What spurious features can pretrained language models combat? (SpuriousBench): datasets with a planted feature
of controlled prevalence and strength, the spurious gap, in-context learning, and the paper's figures."""
