"""The command-line face: click commands and their renderers."""
