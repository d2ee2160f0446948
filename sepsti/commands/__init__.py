"""One module per ``sepsti`` subcommand; each defines a click command."""
