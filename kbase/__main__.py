from kbase.cli import cli

if __name__ == "__main__":  # pragma: no cover
    cli(prog_name="kbase")
