"""confkit: layered application settings."""

from confkit.coerce import CoercionError
from confkit.settings import Field, MissingSettingError, Settings, SettingsError
from confkit.sources import DotEnvSource, EnvSource, IniSource, MappingSource, SourceError, parse_dotenv

__version__ = "2.3.0"

__all__ = [
    "CoercionError",
    "DotEnvSource",
    "EnvSource",
    "Field",
    "IniSource",
    "MappingSource",
    "MissingSettingError",
    "Settings",
    "SettingsError",
    "SourceError",
    "parse_dotenv",
]
