"""One module per accelerator family: pure parsers of vendor tool output, and the probe that runs the tool."""
