"""`@frozen`: a frozen, keyword-only data class whose methods are shared functions instead of generated code.

`dataclasses.dataclass(frozen=True, kw_only=True)` writes `__init__`, `__repr__`, `__eq__`, `__hash__`,
`__setattr__` and `__delattr__` as source text for each class and compiles it with `exec` (six compilations a
class, which no bytecode cache keeps), and importing `dataclasses` imports `inspect`, `ast`, `dis` and `tokenize`.
`accelenv check` defines some thirty such classes before it reads a file; the two costs were a quarter of its
start-up. A `@frozen` class behaves as that dataclass does: keyword-only `__init__` with defaults and
`field(default_factory=...)`, `repr`, `==` and `hash` over the fields (`compare=False` and `repr=False` leave a field
out), `dataclasses.FrozenInstanceError` on assignment, pickling, and `dataclasses.fields`, `replace`, `asdict` and
`is_dataclass`, whose field table is made the first time something asks for it (importing `dataclasses` then).
Use `replace` from here in accelenv's own code, so the start-up path never needs `dataclasses`.
"""

from __future__ import annotations

from typing import Any, TypeVar, dataclass_transform

__all__ = ["field", "frozen", "replace"]

_T = TypeVar("_T")
_MUTABLE = (list, dict, set)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Field:
    """What `field(...)` gives in a class body: the default or the factory that makes it, and whether the field
    takes part in `==`/`hash` and in `repr`."""

    __slots__ = ("compare", "default", "default_factory", "repr")

    def __init__(self, default: Any, default_factory: Any, compare: bool, repr: bool) -> None:
        self.default, self.default_factory, self.compare, self.repr = default, default_factory, compare, repr


def field(*, default: Any = MISSING, default_factory: Any = MISSING, compare: bool = True, repr: bool = True) -> Any:
    """As `dataclasses.field`, for the options accelenv's classes use."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory, compare, repr)


class _Table:
    """A class's fields: (name, annotation, Field) in order, and the names each method reads."""

    __slots__ = ("compare", "fields", "init", "repr")

    def __init__(self, fields: list[tuple[str, Any, Field]]) -> None:
        self.fields = fields
        self.init = tuple((name, f.default, f.default_factory) for name, _, f in fields)
        self.repr = tuple(name for name, _, f in fields if f.repr)
        self.compare = tuple(name for name, _, f in fields if f.compare)


def _is_class_var(annotation: Any) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__qualname__", "")
    return text.startswith(("ClassVar", "typing.ClassVar", "t.ClassVar"))


def _table(cls: type) -> _Table:
    fields: list[tuple[str, Any, Field]] = []
    # not inspect.get_annotations: importing inspect is one of the costs this module exists to avoid
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
        if _is_class_var(annotation):
            continue
        value = cls.__dict__.get(name, MISSING)
        spec = value if isinstance(value, Field) else Field(value, MISSING, True, True)
        if isinstance(spec.default, _MUTABLE):
            raise ValueError(
                f"{cls.__qualname__}.{name}: mutable default {type(spec.default).__name__} is not allowed: "
                "use field(default_factory=...)"
            )
        if spec.default is MISSING:
            if name in cls.__dict__:
                delattr(cls, name)
        else:
            setattr(cls, name, spec.default)
        fields.append((name, annotation, spec))
    return _Table(fields)


def _init(self: Any, **kwargs: Any) -> None:
    cls = type(self)
    for name, default, factory in cls.__frozen_fields__.init:
        if name in kwargs:
            value = kwargs.pop(name)
        elif default is not MISSING:
            value = default
        elif factory is not MISSING:
            value = factory()
        else:
            raise TypeError(f"{cls.__qualname__}.__init__() missing 1 required keyword-only argument: '{name}'")
        object.__setattr__(self, name, value)
    if kwargs:
        raise TypeError(f"{cls.__qualname__}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'")


def _repr(self: Any) -> str:
    cls = type(self)
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in cls.__frozen_fields__.repr)
    return f"{cls.__qualname__}({shown})"


def _key(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, name) for name in type(self).__frozen_fields__.compare)


def _eq(self: Any, other: object) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _key(self) == _key(other)


def _hash(self: Any) -> int:
    return hash(_key(self))


def _frozen_error(message: str) -> Exception:
    import dataclasses

    return dataclasses.FrozenInstanceError(message)


def _setattr(self: Any, name: str, value: Any) -> None:
    raise _frozen_error(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise _frozen_error(f"cannot delete field {name!r}")


class _DataclassFields:
    """`__dataclass_fields__`, made on first use from a twin class that `dataclasses` processes (public API only),
    so that `dataclasses.fields`, `replace`, `asdict` and `is_dataclass` see a dataclass."""

    def __get__(self, instance: object, owner: type) -> dict[str, Any]:
        made = owner.__dict__.get("__frozen_dataclass_fields__")
        if made is None:
            import dataclasses

            namespace: dict[str, Any] = {"__annotations__": {}}
            for name, annotation, spec in owner.__frozen_fields__.fields:  # type: ignore[attr-defined]
                namespace["__annotations__"][name] = annotation
                namespace[name] = dataclasses.field(
                    default=spec.default if spec.default is not MISSING else dataclasses.MISSING,
                    default_factory=(
                        spec.default_factory if spec.default_factory is not MISSING else dataclasses.MISSING
                    ),
                    compare=spec.compare,
                    repr=spec.repr,
                )
            twin: Any = dataclasses.dataclass(type(owner.__name__, (), namespace), frozen=True, kw_only=True)
            made = twin.__dataclass_fields__
            type.__setattr__(owner, "__frozen_dataclass_fields__", made)
        return made  # type: ignore[no-any-return]


_METHODS = {
    "__init__": _init,
    "__repr__": _repr,
    "__eq__": _eq,
    "__hash__": _hash,
    "__setattr__": _setattr,
    "__delattr__": _delattr,
}


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(field,))
def frozen(cls: type[_T]) -> type[_T]:
    """Make `cls` what `@dataclass(frozen=True, kw_only=True)` makes it (see the module's text)."""
    for name in _METHODS:
        if name in cls.__dict__:
            raise TypeError(f"{cls.__qualname__} defines {name}: use dataclasses.dataclass for it, not @frozen")
    if any(hasattr(base, "__frozen_fields__") for base in cls.__mro__[1:]):
        raise TypeError(f"{cls.__qualname__}: a @frozen class cannot inherit another's fields; compose them instead")
    type.__setattr__(cls, "__frozen_fields__", _table(cls))
    for name, function in _METHODS.items():
        setattr(cls, name, function)
    cls.__dataclass_fields__ = _DataclassFields()  # type: ignore[attr-defined]
    type.__setattr__(cls, "__match_args__", ())
    return cls


def replace(obj: _T, /, **changes: Any) -> _T:
    """A copy of a `@frozen` object with `changes`, as `dataclasses.replace` (without importing `dataclasses`)."""
    values = {name: getattr(obj, name) for name, _, _ in type(obj).__frozen_fields__.init}  # type: ignore[attr-defined]
    return type(obj)(**{**values, **changes})  # __init__ refuses a name that is not a field
