"""What running the four papers as one workflow needs, above the papers and below the audit and the command line:
loading and validating a config (``config``), the plan of a config's jobs and their cost (``plan``, ``plan_docs``),
the SLURM requests and the start-up check (``slurm``, ``sizes``), the configuration reference page
(``config_docs``), the results index (``results_index``) and each job's log and error line (``runlog``)."""
