"""The exceptions Duet raises: one class per kind of error, each carrying the
message Duet prints and the exit code the `duet` command would end with
(docs/cli.md lists them)."""


class Error(Exception):
    """A Duet error. `kind` names its class of cause ("config", "model file",
    ...; duet::error_kind_name) and `exit_code` is the `duet` command's exit
    code for it."""

    kind = "internal"
    exit_code = 70

    def __init__(self, message):
        super().__init__(message)
        self.message = message


class UsageError(Error, ValueError):
    """A call Duet cannot take as given (the command line's usage errors)."""
    kind, exit_code = "usage", 2


class ConfigError(Error, ValueError):
    """The pipeline YAML, an override, or a setting is wrong."""
    kind, exit_code = "config", 2


class RequestError(ConfigError):
    """A generation setting is wrong; `param` names it ("temperature",
    "messages[1].role")."""

    def __init__(self, message, param=""):
        super().__init__(message)
        self.param = param


class ModelFileError(Error, OSError):
    """The model file cannot be read or is malformed."""
    kind, exit_code = "model file", 3


class PluginError(Error, RuntimeError):
    """A plugin is missing, refused, or failed (a backend included)."""
    kind, exit_code = "plugin", 4


class OutOfMemoryError(Error, MemoryError):
    """An allocation on a device or the host failed."""
    kind, exit_code = "out of memory", 5


class InputRejectedError(Error, ValueError):
    """A prompt or token input was refused (too long for the cache, ids
    outside the vocabulary, text that is not UTF-8)."""
    kind, exit_code = "input rejected", 6


class MissingToolError(Error, RuntimeError):
    """A program Duet runs is missing or failed."""
    kind, exit_code = "missing tool", 7


class InternalError(Error, RuntimeError):
    """A bug in Duet: please report it."""
    kind, exit_code = "internal", 70
