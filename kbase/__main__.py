from kbase.cli.commands import cli

if __name__ == "__main__":  # pragma: no cover
    cli(prog_name="kbase")
