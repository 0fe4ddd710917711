import pytest

from confkit.sources import (
    DotEnvError,
    DotEnvSource,
    EnvSource,
    IniSource,
    MappingSource,
    SourceError,
    flatten,
    normalize_key,
    parse_dotenv,
)


def test_normalize_key_and_flatten():
    assert normalize_key("DB__HOST") == "db.host"
    assert normalize_key("log_level") == "log_level"
    assert flatten({"DB": {"Host": "x", "pool": {"size": 5}}, "debug": True}) == {
        "db.host": "x",
        "db.pool.size": 5,
        "debug": True,
    }


def test_mapping_source_reads_the_live_mapping():
    data = {"a": 1}
    source = MappingSource(data, name="defaults")
    assert source.load() == {"a": 1}
    data["a"] = 2
    assert source.load() == {"a": 2}
    assert repr(source) == "<MappingSource defaults>"


def test_dotenv_basics():
    text = "# comment\n\nexport DB__HOST=localhost\nDB__PORT = 5432\nEMPTY=\n"
    assert parse_dotenv(text) == {"db.host": "localhost", "db.port": "5432", "empty": ""}


def test_dotenv_quotes_and_escapes():
    text = "A='single $HOME \\n'\nB=\"double\\tquoted \\\"x\\\"\"\nC=\"a=b\"\n"
    assert parse_dotenv(text) == {"a": "single $HOME \\n", "b": 'double\tquoted "x"', "c": "a=b"}


def test_dotenv_inline_comments():
    assert parse_dotenv("PORT=8080 # web port\nNAME=app#1\n") == {"port": "8080", "name": "app#1"}
    assert parse_dotenv('A="x"  # note\n') == {"a": "x"}


def test_dotenv_hash_inside_quotes_is_kept():
    text = "PASSWORD=\"s3cr3t #1\"\nGREETING='hello # world'  # a comment\n"
    assert parse_dotenv(text) == {"password": "s3cr3t #1", "greeting": "hello # world"}


def test_dotenv_errors_name_file_and_line():
    with pytest.raises(DotEnvError, match=r"^app\.env:2: expected KEY=value"):
        parse_dotenv("A=1\nnot a line\n", path="app.env")
    with pytest.raises(DotEnvError, match="unterminated"):
        parse_dotenv('A="open\n')
    with pytest.raises(DotEnvError, match="after the closing quote"):
        parse_dotenv('A="x" y\n')


def test_dotenv_source_file_required_or_optional(tmp_path):
    path = tmp_path / ".env"
    with pytest.raises(SourceError, match="not found"):
        DotEnvSource(path).load()
    assert DotEnvSource(path, required=False).load() == {}
    path.write_text("A=1\n")
    assert DotEnvSource(path).load() == {"a": "1"}


def test_dotenv_source_reads_the_file_again_on_every_load(tmp_path):
    path = tmp_path / "local.env"
    source = DotEnvSource(path, required=False)
    assert source.load() == {}
    path.write_text("LEVEL=debug\n")
    assert source.load() == {"level": "debug"}
    path.write_text("LEVEL=info\n")
    assert source.load() == {"level": "info"}


def test_ini_source_sections_and_defaults(tmp_path):
    path = tmp_path / "app.ini"
    path.write_text("[DEFAULT]\ndebug = true\n\n[DB]\nHost = db.internal\nport = 5432\n")
    assert IniSource(path).load() == {"debug": "true", "db.host": "db.internal", "db.port": "5432"}


def test_ini_source_errors(tmp_path):
    path = tmp_path / "bad.ini"
    path.write_text("no section header\n")
    with pytest.raises(SourceError, match=r"bad\.ini"):
        IniSource(path).load()
    assert IniSource(tmp_path / "missing.ini", required=False).load() == {}


def test_env_source_nested_names():
    environ = {"APP__DB__HOST": "db", "APP__DEBUG": "1", "HOME": "/root"}
    assert EnvSource("APP", environ=environ).load() == {"db.host": "db", "debug": "1"}


def test_env_source_custom_separator_and_empty_parts():
    environ = {"SVC_LOG_LEVEL": "info", "SVC__X": "1"}
    assert EnvSource("SVC", separator="_", environ=environ).load() == {"log.level": "info"}


def test_env_source_needs_the_prefix_and_the_separator():
    environ = {"APP__PORT": "80", "APPLICATION_ID": "7", "APP_DEBUG": "1", "APPS__X": "2"}
    assert EnvSource("APP", environ=environ).load() == {"port": "80"}


def test_env_source_rejects_bad_prefixes():
    with pytest.raises(ValueError):
        EnvSource("")
    with pytest.raises(ValueError):
        EnvSource("APP_")
