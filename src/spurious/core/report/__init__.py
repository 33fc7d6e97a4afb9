"""What every paper's report writes: tables as CSV and Markdown (``tables``) and figures as PNG and SVG, checked for
readability (``figures``)."""
