"""Loads configuration from the environment; the real token lives in .env (never committed upstream)."""
import os


def load_config() -> dict:
    # TODO: validate the token format
    return {"name": os.environ.get("APP_NAME", "world"), "token": os.environ.get("API_TOKEN", "")}
