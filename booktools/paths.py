"""Where things are, independent of the notebook's working directory."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = REPO_ROOT / "data"
EXT_DIR = REPO_ROOT / "ext"  # the mylinearops extension
CHAPTERS_DIR = REPO_ROOT / "chapters"
CONFIG_FILE = REPO_ROOT / "_config.yml"
REQUIREMENTS_FILE = REPO_ROOT / "requirements.txt"


def repository_url() -> str:
    """The book's repository URL: the one setting, `repository.url` in _config.yml."""
    import yaml

    with open(CONFIG_FILE, encoding="utf-8") as f:
        url = yaml.safe_load(f)["repository"]["url"]
    if not isinstance(url, str) or not url.startswith(("https://", "file://")):
        raise ValueError(f"{CONFIG_FILE}: repository.url must be an https:// URL, got {url!r}")
    return url.rstrip("/")
