import pytest

from confkit import (
    DotEnvSource,
    EnvSource,
    Field,
    MappingSource,
    MissingSettingError,
    Settings,
    SettingsError,
)
from confkit.settings import nest

DEFAULTS = {"db": {"host": "localhost", "port": "5432"}, "debug": "off", "plugins": "auth, cache"}


def make(*more, fields=()):
    return Settings([MappingSource(DEFAULTS, name="defaults"), *more], fields=fields)


def test_later_sources_override_earlier_ones():
    settings = make(MappingSource({"db": {"port": "6543"}}, name="local"))
    assert settings.get("db.host") == "localhost"
    assert settings.get_int("db.port") == 6543
    assert settings.origin("db.port") == "local"
    assert settings.explain("db.port") == "db.port = '6543' (from local; overrides defaults)"


def test_keys_are_case_insensitive():
    settings = make()
    assert settings.get("DB.Host") == "localhost"
    assert "Db.Port" in settings
    assert "db.user" not in settings


def test_typed_getters():
    settings = make(MappingSource({"cache": {"size": "64MiB"}, "ratio": "0.5"}))
    assert settings.get_bool("debug") is False
    assert settings.get_size("cache.size") == 64 * 1024**2
    assert settings.get_float("ratio") == 0.5
    assert settings.get("db.port", kind="int") == 5432


def test_missing_keys_and_defaults():
    settings = make()
    with pytest.raises(MissingSettingError, match=r"'db.user' is not set \(looked in: defaults\)"):
        settings.get("db.user")
    assert settings.get("db.user", "admin") == "admin"
    assert settings.get_int("db.pool", 5) == 5
    with pytest.raises(SettingsError, match="not a setting key"):
        settings.get("db..host")


def test_coercion_errors_name_key_and_origin():
    settings = make(MappingSource({"db": {"port": "http"}}, name="broken"))
    with pytest.raises(SettingsError, match=r"db.port \(from broken\): cannot read 'http' as an integer"):
        settings.get_int("db.port")


def test_get_list():
    settings = make()
    assert settings.get_list("plugins") == ["auth", "cache"]
    assert settings.get_list("missing", ["x"]) == ["x"]
    assert settings.get_list("missing") == []


def test_get_list_result_may_be_changed_by_the_caller():
    settings = make()
    settings.get_list("plugins").append("admin")
    assert settings.get_list("plugins") == ["auth", "cache"]


def test_get_list_default_is_a_new_list_every_time():
    first = make()
    first.get_list("extra_plugins").append("debug-toolbar")
    assert first.get_list("extra_plugins") == []
    assert make().get_list("extra_plugins") == []


def test_get_list_does_not_return_the_given_default_itself():
    fallback = ["a"]
    settings = make()
    settings.get_list("missing", fallback).append("b")
    assert fallback == ["a"]


def test_override_is_temporary_and_wins():
    settings = make()
    assert settings.get_int("db.port") == 5432
    with settings.override({"db": {"port": 7000}}, debug="on"):
        assert settings.get_int("db.port") == 7000
        assert settings.get_bool("debug") is True
        assert settings.origin("db.port") == "override"
    assert settings.get_int("db.port") == 5432


def test_reload_reads_mappings_again():
    data = {"db": {"host": "a"}}
    settings = Settings([MappingSource(data)])
    data["db"]["host"] = "b"
    assert settings.get("db.host") == "a"
    settings.reload()
    assert settings.get("db.host") == "b"


def test_reload_forgets_coerced_values():
    data = {"workers": "4"}
    settings = Settings([MappingSource(data)])
    assert settings.get_int("workers") == 4
    data["workers"] = "8"
    settings.reload()
    assert settings.get_int("workers") == 8


def test_reload_picks_up_an_edited_env_file(tmp_path):
    path = tmp_path / ".env"
    path.write_text("WORKERS=4\nDEBUG=off\n")
    settings = Settings([DotEnvSource(path)])
    assert settings.get_int("workers") == 4
    path.write_text("WORKERS=16\nDEBUG=on\n")
    settings.reload()
    assert settings.get_int("workers") == 16
    assert settings.get_bool("debug") is True


def test_add_source_overrides_everything_before_it():
    settings = make()
    assert settings.get_bool("debug") is False
    settings.add_source(EnvSource("APP", environ={"APP__DEBUG": "yes"}))
    assert settings.get_bool("debug") is True


def test_fields_give_defaults_kinds_and_validation():
    fields = [
        Field("db.port", kind="int"),
        Field("db.user", required=True),
        Field("log.level", default="info", choices=("debug", "info", "warning")),
        Field("workers", kind="int", default=2),
    ]
    settings = make(MappingSource({"log": {"level": "loud"}}, name="local"), fields=fields)
    assert settings.get("db.port") == 5432
    assert settings.get("workers") == 2
    assert settings.validate() == [
        "db.user: required but not set",
        "log.level (from local): 'loud' is not one of 'debug', 'info', 'warning'",
    ]
    with pytest.raises(SettingsError, match=r"^invalid settings: db\.user"):
        settings.check()


def test_field_declarations_are_checked():
    with pytest.raises(SettingsError, match="unknown kind"):
        Field("a", kind="decimal")
    with pytest.raises(SettingsError, match="cannot have a default"):
        Field("a", required=True, default=1)
    with pytest.raises(SettingsError, match="declared twice"):
        Settings([], fields=[Field("a"), Field("A")])


def test_sections_and_dicts():
    settings = make()
    assert settings.section("db") == {"host": "localhost", "port": "5432"}
    assert settings.as_dict(nested=True)["db"] == {"host": "localhost", "port": "5432"}
    assert settings.keys() == ["db.host", "db.port", "debug", "plugins"]
    assert len(settings) == 4


def test_nest_rejects_a_value_with_children():
    with pytest.raises(SettingsError):
        nest({"db": "x", "db.host": "y"})


def test_require():
    settings = make()
    settings.require("db.host", "debug")
    with pytest.raises(MissingSettingError, match=r"'db\.user'"):
        settings.require("db.host", "db.user")


def test_from_files_by_suffix(tmp_path, monkeypatch):
    (tmp_path / "app.ini").write_text("[db]\nhost = from-ini\nport = 1\n")
    (tmp_path / ".env").write_text("DB__PORT=2\n")
    monkeypatch.setenv("MYAPP__DB__PORT", "3")
    settings = Settings.from_files(tmp_path / "app.ini", tmp_path / ".env", tmp_path / "absent.ini",
                                   env_prefix="MYAPP")
    assert settings.get("db.host") == "from-ini"
    assert settings.get_int("db.port") == 3
    with pytest.raises(SettingsError, match="unknown settings file type"):
        Settings.from_files(tmp_path / "app.toml")
