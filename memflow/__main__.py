"""``python -m memflow ...``: the same command line as the ``memflow`` script."""
from .cli.main import entry

if __name__ == "__main__":
    entry()
