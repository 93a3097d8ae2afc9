"""The planner's garbage-collector settings are scoped: on again, unfrozen, after the block."""
import gc

from memflow.gcfreeze import freeze, long_lived, paused_collection


def test_long_lived_freezes_what_exists_and_unfreezes_after():
    assert gc.get_freeze_count() == 0
    with long_lived():
        inside = gc.get_freeze_count()
        made = [object() for _ in range(3)]
        freeze()
        assert gc.get_freeze_count() >= inside > 0
    assert gc.get_freeze_count() == 0
    del made


def test_paused_collection_turns_the_collector_off_and_back_on():
    assert gc.isenabled()
    with paused_collection():
        assert not gc.isenabled()
        with paused_collection():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves it as the outer one set it
    assert gc.isenabled()


def test_paused_collection_leaves_a_disabled_collector_disabled():
    gc.disable()
    try:
        with paused_collection():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_paused_collection_restores_on_error():
    try:
        with paused_collection():
            raise ValueError("x")
    except ValueError:
        pass
    assert gc.isenabled()
