"""``python -m clustersim serve --scenario NAME ...`` (see clustersim.cli)."""

from clustersim.cli import main

if __name__ == "__main__":
    main()
