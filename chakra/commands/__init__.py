"""One module per `chakra` subcommand; each defines `register(app: typer.Typer)`."""
