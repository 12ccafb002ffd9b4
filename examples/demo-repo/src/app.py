"""A tiny HTTP-less service: prints a greeting using the configured name."""
from config import load_config


def main() -> None:
    config = load_config()
    # TODO: read the greeting from docs/greeting.txt instead of hard-coding it
    print(f"Hello, {config['name']}!")


if __name__ == "__main__":
    main()
