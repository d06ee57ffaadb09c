"""`accelenv.records.frozen` behaves as `@dataclass(frozen=True, kw_only=True)` does, for everything accelenv and its
callers do with a model: each case builds the same class both ways and compares what they do."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import pickle
import pkgutil
from typing import Any, ClassVar

import pytest

import accelenv
from accelenv import records
from accelenv.records import field, frozen


def _pair() -> tuple[Any, Any]:
    """The same class as a dataclass and as a @frozen class."""

    def body() -> dict[str, Any]:
        return {
            "__annotations__": {
                "name": "str",
                "count": "int",
                "tags": "tuple[str, ...]",
                "extra": "tuple[str, ...]",
                "path": "str",
                "secret": "str",
                "kind": "ClassVar[str]",
            },
            "count": 1,
            "tags": (),
            "path": None,  # replaced below by each kind's field()
            "secret": None,
            "extra": None,
            "kind": "class-level",
        }

    plain = body()
    plain["extra"] = dataclasses.field(default_factory=list)
    plain["path"] = dataclasses.field(default="matrix.toml", compare=False)
    plain["secret"] = dataclasses.field(default="", repr=False)
    ours = body()
    ours["extra"] = field(default_factory=list)
    ours["path"] = field(default="matrix.toml", compare=False)
    ours["secret"] = field(default="", repr=False)
    return (
        dataclasses.dataclass(frozen=True, kw_only=True)(type("Thing", (), plain)),
        frozen(type("Thing", (), ours)),
    )


PLAIN, OURS = _pair()
ARGS: dict[str, Any] = {"name": "h200", "count": 8, "tags": ("a",), "extra": ("k",), "secret": "s3"}


def _outcome(call: Any) -> tuple[str, str]:
    try:
        return ("value", repr(call()))
    except Exception as exc:
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize(
    "kwargs",
    [
        ARGS,
        {"name": "x"},
        {},  # missing a required field
        {"name": "x", "colour": "red"},  # an unknown one
        {"name": "x", "kind": "instance"},  # a ClassVar is not a field
    ],
)
def test_construction_and_repr_match_dataclasses(kwargs: dict[str, Any]) -> None:
    assert _outcome(lambda: OURS(**kwargs)) == _outcome(lambda: PLAIN(**kwargs))


def test_positional_arguments_are_refused_as_by_kw_only() -> None:
    with pytest.raises(TypeError):
        OURS("h200")
    with pytest.raises(TypeError):
        PLAIN("h200")


def test_equality_and_hash_follow_the_compared_fields() -> None:
    a, b = OURS(**ARGS), OURS(**ARGS)
    assert a == b
    assert hash(a) == hash(b) == hash(OURS(**ARGS, path="elsewhere.toml"))
    assert a != OURS(**{**ARGS, "count": 9})
    assert a == OURS(**ARGS, path="elsewhere.toml")  # compare=False
    assert a != PLAIN(**ARGS)  # another class, as with dataclasses
    assert (OURS(**ARGS) == OURS(**ARGS)) is (PLAIN(**ARGS) == PLAIN(**ARGS))
    with pytest.raises(TypeError):  # an unhashable compared field fails as with dataclasses
        hash(OURS(name="x", tags=[1]))
    with pytest.raises(TypeError):
        hash(PLAIN(name="x", tags=[1]))


def test_default_factory_makes_a_fresh_value_each_time() -> None:
    assert OURS(name="a").extra == []
    assert OURS(name="a").extra is not OURS(name="b").extra
    assert OURS.count == 1
    assert OURS.kind == "class-level"


@pytest.mark.parametrize("action", ["assign", "delete", "new"])
def test_instances_are_frozen_with_the_dataclasses_error(action: str) -> None:
    def act(obj: Any) -> None:
        if action == "assign":
            obj.count = 2
        elif action == "delete":
            del obj.count
        else:
            obj.colour = "red"

    for cls in (OURS, PLAIN):
        with pytest.raises(dataclasses.FrozenInstanceError):
            act(cls(**ARGS))


def test_dataclasses_functions_see_a_dataclass() -> None:
    obj: Any = OURS(**ARGS)
    assert all(dataclasses.is_dataclass(each) for each in (OURS, obj))
    assert [(f.name, f.compare, f.repr) for f in dataclasses.fields(obj)] == [
        (f.name, f.compare, f.repr) for f in dataclasses.fields(PLAIN)
    ]
    assert dataclasses.asdict(obj) == dataclasses.asdict(PLAIN(**ARGS))
    assert dataclasses.replace(obj, count=3) == OURS(**{**ARGS, "count": 3})
    assert records.replace(obj, count=3) == dataclasses.replace(obj, count=3)
    assert records.replace(obj) == obj
    assert records.replace(obj) is not obj


def test_replace_refuses_an_unknown_field() -> None:
    with pytest.raises(TypeError, match="colour"):
        records.replace(OURS(**ARGS), colour="red")


def test_pickle_and_copies_keep_the_value() -> None:
    obj = OURS(**ARGS)
    # pickling needs a module-level class: the matrix cache and the host report use the real models
    from accelenv.check.verdict import Finding, Status

    finding = Finding(id="driver", status=Status.FAIL, expected="580", found="550", message="old", fix="upgrade")
    assert pickle.loads(pickle.dumps(finding)) == finding  # noqa: S301 - its own bytes
    assert copy.deepcopy(obj) == obj
    assert copy.copy(obj) == obj


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"__annotations__": {"items": "list[str]"}, "items": []}, "mutable default list"),
        ({"__annotations__": {"x": "int"}, "__eq__": lambda self, other: True}, "defines __eq__"),
    ],
)
def test_what_dataclasses_would_refuse_or_lose_is_refused(body: dict[str, Any], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        frozen(type("Bad", (), body))


def test_a_frozen_class_cannot_inherit_another() -> None:
    @frozen
    class Base:
        x: int

    with pytest.raises(TypeError, match="cannot inherit"):

        @frozen
        class Child(Base):
            y: int


def test_a_class_var_is_not_a_field() -> None:
    @frozen
    class WithConstant:
        LIMIT: ClassVar[int] = 3
        x: int

    assert [f.name for f in dataclasses.fields(WithConstant)] == ["x"]
    assert WithConstant(x=1).LIMIT == 3


def _frozen_classes() -> list[type]:
    found = []
    for info in pkgutil.walk_packages(accelenv.__path__, "accelenv."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        found += [
            value
            for value in vars(module).values()
            if isinstance(value, type) and value.__module__ == info.name and "__frozen_fields__" in value.__dict__
        ]
    return found


def test_every_model_of_accelenv_is_a_dataclass_to_its_callers() -> None:
    classes = _frozen_classes()
    assert len(classes) > 100  # the walk found the models
    for cls in classes:
        names = [f.name for f in dataclasses.fields(cls)]
        annotated = [n for n, a in cls.__annotations__.items() if not str(a).startswith("ClassVar")]
        assert names == annotated, cls.__qualname__
