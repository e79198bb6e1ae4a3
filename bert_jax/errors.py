"""The one exception type the CLI turns into a one-line message instead of a traceback."""


class BertJaxError(ValueError):
    """Bad user input (a file, field or tensor) described in one line."""
