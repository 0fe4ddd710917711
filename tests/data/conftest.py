"""Fixture repositories live below this directory; their tests run only inside scratch copies."""

collect_ignore_glob = ["*"]
