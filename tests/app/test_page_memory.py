"""A browser tab's chat conversation and History selection, kept in the workspace by the tab's id (app.page_memory):
back after a reload and a board restart, each tab its own, media copied out of gradio's cache, files bounded in
count and size, a bad file ignored with a log line."""

from __future__ import annotations

import base64
import json
import logging
import sys
from pathlib import Path

import pytest

from app import chat_media, chat_status, page_memory
from app.context import Board
from app.jobs import JobManager
from app.tabs import chat

REPO = Path(__file__).resolve().parents[2]
PICTURE = REPO / "examples" / "data" / "demo_vlm" / "red_square.png"
FAKE_ENGINE = Path(__file__).with_name("fake_engine.py")
PAGE = "a" * 32
OTHER = "b" * 32


@pytest.fixture()
def uploads(tmp_path, monkeypatch):
    """gradio's upload folder (a temp one) with a picture in it, as an upload leaves it."""
    root = tmp_path / "gradio-uploads"
    (root / "x1").mkdir(parents=True)
    image = root / "x1" / "red.png"
    image.write_bytes(PICTURE.read_bytes())
    monkeypatch.setattr(chat, "upload_folder", lambda: str(root))
    return root, image


def picture_convo(image: Path) -> list[dict]:
    content = chat_media.user_content("What is in the picture?", [("image", image)])
    return [{"role": "user", "content": content}, {"role": "assistant", "content": "A red square."}]


def test_a_conversation_with_a_picture_comes_back_after_a_reload_and_a_restart(board, uploads):
    root, image = uploads
    convo = picture_convo(image)
    page_memory.save_chat(board, PAGE, convo, [], {})
    raw = (board.workspace.root / "pages" / f"{PAGE}.json").read_text()
    assert "base64" not in raw and str(root) not in raw  # the picture by name, never its bytes or gradio's path
    image.unlink()  # gradio's cache cleanup (or a restart that emptied it)
    page_memory._STORES.clear()  # a board restarted on the same workspace
    main, base, shown, shown_base = page_memory.restore_chat(board, page_memory.memory(board).read(PAGE)["chat"], "en")
    part = main[0]["content"][0]
    assert part["image_url"]["url"] == convo[0]["content"][0]["image_url"]["url"]  # the model sees the same picture
    again = Path(part[chat_media.DISPLAY_KEY])
    assert again.read_bytes() == PICTURE.read_bytes() and again.is_relative_to(root)  # shown from gradio's folder
    assert shown["value"][0] == {"role": "user", "content": {"path": str(again)}}
    assert [m["content"] for m in shown["value"][1:]] == ["What is in the picture?", "A red square."]
    assert main[1:] == convo[1:] and base == [] and shown_base == page_memory.gr.skip()
    assert "label" not in shown  # nothing was loaded: no model to name
    assert page_memory.unloaded_model(board, page_memory.memory(board).read(PAGE)["chat"]) is None


def test_the_model_it_was_with_is_named_when_it_is_no_longer_loaded(board, uploads, monkeypatch):
    monkeypatch.setattr(chat_status, "served", lambda board, run_id: ("demo-model", "runs/x/adapter"))
    page_memory.save_chat(board, PAGE, [{"role": "user", "content": "hi"}], [], {"main": "run-1"})
    page_memory.save_chat(board, PAGE, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
                          [], {})  # unloaded since: the conversation still says which model it was with
    kept = page_memory.memory(board).read(PAGE)["chat"]
    assert (kept["model"], kept["adapter"]) == ("demo-model", "runs/x/adapter")
    # the conversation comes back as soon as the page's id is known; the line naming the model once its language is
    restored, convo, _, shown, _, status, *_ = page_memory.restore(board, PAGE, "", False)
    assert restored == "kept" and convo[1]["content"] == "yo" and status == page_memory.gr.skip()
    assert str(shown["label"]) == str(chat.box_label("x")["label"])  # the fine-tuned model's box
    restored, *middle, status, selected, compare, system, tools = page_memory.restore(board, PAGE, "zh", "kept")
    assert restored is True and middle == [page_memory.gr.skip()] * 4
    assert selected == compare == system == page_memory.gr.skip()
    assert "demo-model + runs/x/adapter" in status and "加载模型" in status
    assert page_memory.restore(board, PAGE, "en", True) == (page_memory.gr.skip(),) * 10  # once per page load
    # and nothing is kept before the page load has brought it back (the page's empty start would overwrite it)
    page_memory.save_chat(board, PAGE, [], [], {}, False)
    assert page_memory.memory(board).read(PAGE)["chat"]["convo"][1]["content"] == "yo"


def test_two_tabs_keep_their_own_and_the_selection_beside_the_chat(board, uploads):
    page_memory.save_chat(board, PAGE, [{"role": "user", "content": "apples"}], [], {})
    page_memory.save_chat(board, OTHER, [{"role": "user", "content": "pears"}], [], {})
    page_memory.save_selection(board, PAGE, ["run-a"])
    store = page_memory.memory(board)
    assert store.read(PAGE)["chat"]["convo"][0]["content"] == "apples"
    assert store.read(PAGE)["history"] == {"selected": ["run-a"]}
    assert store.read(OTHER)["chat"]["convo"][0]["content"] == "pears" and "history" not in store.read(OTHER)


def test_the_history_selection_comes_back_for_runs_that_still_exist(board):
    a = board.jobs.submit("train", {"fake_steps": 1, "stage": "sft"})
    b = board.jobs.submit("train", {"fake_steps": 1, "stage": "sft"})
    assert board.jobs.wait(a, 30) == "completed" and board.jobs.wait(b, 30) == "completed"
    page_memory.save_selection(board, PAGE, [b, "gone-run"])
    out = page_memory.restore(board, PAGE, "en", False)
    assert out[0] is True and out[6]["value"] == [b] and (b, b) in out[6]["choices"]
    assert page_memory.restore(board, PAGE, "", False)[6]["value"] == [b]  # (its language not known yet)
    assert page_memory.restore(board, PAGE, "en", True) == (page_memory.gr.skip(),) * 10  # once per page load
    assert page_memory.restore(board, "../../etc", "en", False) == (page_memory.gr.skip(),) * 10
    page_memory.save_selection(board, PAGE, [], False)  # before the page load brought it back: not kept
    assert page_memory.memory(board).read(PAGE)["history"] == {"selected": [b, "gone-run"]}


def test_the_side_by_side_box_comes_back_as_the_user_set_it(board):
    skip = page_memory.gr.skip()
    assert page_memory.restore(board, PAGE, "en", False)[7] == skip  # never set: the page's own
    page_memory.save_compare(board, PAGE, True)
    assert page_memory.restore(board, PAGE, "en", False)[7] is True
    assert page_memory.restore(board, PAGE, "en", "kept")[7] == skip  # once per page load
    page_memory.save_compare(board, PAGE, False, restored=False)  # before the page load brought it back: not kept
    page_memory.save_compare(board, OTHER, False)  # another tab keeps its own
    assert page_memory.restore(board, PAGE, "en", False)[7] is True
    page_memory.save_compare(board, PAGE, False)
    assert page_memory.restore(board, PAGE, "en", False)[7] is False
    page_memory.memory(board).save(PAGE, "compare", "yes")  # a hand-edited file: left at the page's own
    assert page_memory.restore(board, PAGE, "en", False)[7] == skip


def test_a_duplicated_tab_starts_as_a_copy_of_its_original_and_then_keeps_its_own(board):
    page_memory.save_chat(board, PAGE, [{"role": "user", "content": "apples"}], [], {})
    page_memory.save_selection(board, PAGE, ["run-a"])
    page_memory.save_compare(board, PAGE, True)
    store = page_memory.memory(board)
    # the duplicate (a new id, its original's id beside it) is brought back with the original's conversation
    out = page_memory.restore(board, OTHER, "", False, origin=PAGE)
    assert out[1] == [{"role": "user", "content": "apples"}] and out[7] is True
    assert store.read(OTHER)["history"] == {"selected": ["run-a"]}
    page_memory.save_chat(board, OTHER, [{"role": "user", "content": "pears"}], [], {})  # then they part
    page_memory.save_selection(board, OTHER, [])
    assert store.read(PAGE)["chat"]["convo"][0]["content"] == "apples"
    assert store.read(PAGE)["history"] == {"selected": ["run-a"]}
    store.fork(OTHER, PAGE)  # once: never copied over what the duplicate kept since
    assert store.read(OTHER)["chat"]["convo"][0]["content"] == "pears"
    store.fork("c" * 32, "../../etc")  # only a page id names a file
    assert not store.path("c" * 32).exists()


def test_the_page_tells_a_duplicated_tab_from_a_reload():
    js = page_memory.PAGE_ID_JS  # a live tab's lock (or its answer on a channel) marks a copy; a reload is not asked
    assert "navigator.locks.query()" in js and "BroadcastChannel" in js and '!== "reload"' in js
    assert "return origin;" in js and "__" not in js  # every placeholder filled


def test_the_system_prompt_tools_and_sampling_settings_come_back_with_the_conversation(board):
    import gradio as gr

    fields = {"temperature": gr.Slider(0, 2), "top_k": gr.Slider(0, 1000), "max_new_tokens": gr.Number(minimum=1)}
    settings = page_memory.chat_settings("Answer in French.", '[{"name": "f"}]', list(fields), (0.3, 5000, None))
    assert settings == {"system": "Answer in French.", "tools": '[{"name": "f"}]',
                        "values": {"temperature": 0.3, "top_k": 5000}}
    page_memory.save_chat(board, PAGE, [{"role": "user", "content": "bonjour"}], [], {}, True, settings)
    *_, system, tools, temperature, top_k, max_new_tokens = page_memory.restore(board, PAGE, "en", False, fields)
    assert (system, tools, temperature) == ("Answer in French.", '[{"name": "f"}]', 0.3)
    skip = page_memory.gr.skip()
    assert top_k == skip and max_new_tokens == skip  # out of its range (a hand-edited file), and never kept
    page_memory.save_chat(board, PAGE, [], [], {}, True, settings)  # Clear: no conversation, settings left alone
    assert page_memory.restore(board, PAGE, "en", False, fields)[-5:] == (skip,) * 5


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b"\xff\xfe", None])
def test_a_corrupt_or_too_big_file_is_ignored_with_a_log_line(board, caplog, content):
    store = page_memory.memory(board)
    store.folder.mkdir(parents=True, exist_ok=True)
    path = store.folder / f"{PAGE}.json"
    path.write_bytes(content if content is not None else b'{"chat": {"convo": []}, "x": "' + b"y" * store.max_bytes
                     + b'"}')
    with caplog.at_level(logging.WARNING, logger="app.page_memory"):
        assert page_memory.restore(board, PAGE, "en", False) == (True, *(page_memory.gr.skip(),) * 9)
    assert str(path) in caplog.text


def test_a_conversation_of_an_unknown_shape_is_ignored(board, caplog):
    store = page_memory.memory(board)
    store.folder.mkdir(parents=True, exist_ok=True)
    (store.folder / f"{PAGE}.json").write_text(json.dumps({"chat": {"convo": [{"role": "hacker", "content": 1}]}}))
    with caplog.at_level(logging.WARNING, logger="app.page_memory"):
        assert page_memory.restore(board, PAGE, "en", False)[1:] == (page_memory.gr.skip(),) * 9
    assert "unknown shape" in caplog.text


def test_files_are_bounded_in_count_and_size_and_unused_media_go(workspace, uploads, monkeypatch):
    root, image = uploads
    jobs = JobManager(workspace.runs_dir, [sys.executable, str(FAKE_ENGINE)])
    board = Board(workspace=workspace, jobs=jobs)
    store = page_memory.PageMemory(workspace.root, max_pages=3, max_bytes=4096)
    monkeypatch.setitem(page_memory._STORES, str(workspace.root), store)
    page_memory.save_chat(board, "0" * 32, picture_convo(image), [], {})
    assert len(list(store.media.iterdir())) == 1
    for n in range(1, 5):
        page_memory.save_chat(board, str(n) * 32, [{"role": "user", "content": f"page {n}"}], [], {})
    assert sorted(p.stem[0] for p in store.folder.glob("*.json")) == ["2", "3", "4"]  # the oldest pruned
    assert list(store.media.iterdir()) == []  # the picture only the pruned page showed
    long = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "x" * 200} for i in range(60)]
    page_memory.save_chat(board, PAGE, long, [], {})
    kept = store.read(PAGE)["chat"]["convo"]
    assert (store.folder / f"{PAGE}.json").stat().st_size <= 4096
    assert 0 < len(kept) < 60 and kept == long[-len(kept):]  # the newest turns kept


def test_only_a_page_id_names_a_file_and_no_secret_is_written(board, monkeypatch):
    page_memory.save_chat(board, "../../outside", [{"role": "user", "content": "x"}], [], {})
    page_memory.save_selection(board, "", ["r"])
    assert not (board.workspace.root / "pages").exists() and not (board.workspace.root.parent / "outside.json").exists()
    monkeypatch.setenv("HF_TOKEN", "hf_secretvalue123")
    page_memory.save_chat(board, PAGE, [{"role": "user", "content": "my token is hf_secretvalue123"}], [], {})
    assert "hf_secretvalue123" not in (board.workspace.root / "pages" / f"{PAGE}.json").read_text()


def test_the_page_sends_its_tab_id_and_keeps_each_change(board):
    from app.ui import build_ui

    demo = build_ui(board)
    loads = [fn for fn in demo.fns.values() if fn.js == page_memory.PAGE_ID_JS]
    assert len(loads) == 1 and any(name == "load" for _, name in loads[0].targets)
    origin = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-page-origin")
    then = [fn for fn in demo.fns.values() if fn.js == page_memory.PAGE_ID_THEN_JS]
    assert loads[0].outputs == [origin] and len(then) == 1 and then[0].trigger_after == loads[0]._id
    assert "sessionStorage" in page_memory.PAGE_ID_JS and "localStorage" not in page_memory.PAGE_ID_JS
    page_id = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-page-id")
    savers = [fn for fn in demo.fns.values() if page_id in fn.inputs and fn.outputs == []
              and {n for _, n in fn.targets} == {"change"}]
    assert len(savers) == 3  # the conversation (either side), the History selection, the run the picker follows
    assert all(fn.trigger_mode == "always_last" for fn in savers)
    assert sum(len(fn.targets) for fn in savers) == 4
    compare = next(b for b in demo.blocks.values() if isinstance(b, page_memory.gr.Checkbox)
                   and str(getattr(b, "label", "")) == str(chat.L("chat_compare")))
    kept = [fn for fn in demo.fns.values() if fn.inputs[:2] == [page_id, compare] and fn.outputs == []]
    assert len(kept) == 1 and {n for _, n in kept[0].targets} == {"input"}  # the side-by-side box, as the user sets it
    restorers = [fn for fn in demo.fns.values() if fn.inputs and fn.inputs[0] is page_id and compare in fn.outputs]
    assert len(restorers) == 1


def test_media_part_round_trip():
    part = chat_media.media_part("audio", PICTURE)
    assert chat_media.part_kind(part) == "audio" and base64.b64decode(part["input_audio"]["data"])[:4] == b"\x89PNG"
    assert chat_media.part_kind({"type": "video_url"}) == "video" and chat_media.part_kind({"type": "text"}) is None


def test_the_media_folder_is_bounded_in_total_oldest_tabs_first_never_a_live_tabs(workspace, uploads, monkeypatch,
                                                                                   caplog):
    """Each upload and each tab's file was bounded, but not pages/media as a whole: 64 tabs' conversations could
    keep 64 x many uploads. A medium that would pass the bound removes the oldest tabs' media first; one that does
    not fit beside the media of live tabs (saved in the last LIVE_SECONDS) is not kept."""
    import os
    import time

    root, _ = uploads
    jobs = JobManager(workspace.runs_dir, [sys.executable, str(FAKE_ENGINE)])
    board = Board(workspace=workspace, jobs=jobs)
    store = page_memory.PageMemory(workspace.root, max_media_bytes=10_000)
    monkeypatch.setitem(page_memory._STORES, str(workspace.root), store)
    pictures = {}
    for mark in "ABCDEFG":
        pictures[mark] = root / "x1" / f"{mark}.png"
        pictures[mark].write_bytes(PICTURE.read_bytes() + mark.encode() * (3000 - len(PICTURE.read_bytes())))

    def save(page, *marks, age=0.0):
        content = chat_media.user_content("look", [("image", pictures[m]) for m in marks])
        page_memory.save_chat(board, page, [{"role": "user", "content": content}], [], {})
        then = time.time() - age
        os.utime(store.path(page), (then, then))
        return page_memory.media_names(store.read(page)["chat"]["convo"])

    def media_bytes():
        return sum(p.stat().st_size for p in store.media.iterdir())

    old = page_memory.LIVE_SECONDS
    first, second, live = "1" * 32, "2" * 32, "3" * 32
    a = save(first, "A", age=old + 300)
    b = save(second, "B", age=old + 200)
    c = save(live, "C", age=10)
    assert media_bytes() == 9000
    d = save(PAGE, "D")  # 12,000 bytes: the oldest tab's picture goes
    assert not store.media_file(a[0]) and all(store.media_file(n[0]) for n in (b, c, d))
    assert media_bytes() <= 10_000 and store.path(first).is_file()  # its text stays
    assert page_memory.restore_chat(board, store.read(first)["chat"], "en")[0][0]["content"] == [
        {"type": "text", "text": "look"}]  # shown without the picture
    de = save(PAGE, "D", "E")  # the next oldest tab's goes; this tab's own D stays
    assert not store.media_file(b[0]) and len(de) == 2 and all(store.media_file(n) for n in de + c)
    with caplog.at_level(logging.WARNING, logger="app.page_memory"):
        kept = save(PAGE, "D", "E", "F")  # only live tabs' media left: F is not kept, nothing of theirs goes
    assert kept == de and all(store.media_file(n) for n in de + c) and media_bytes() <= 10_000
    assert "not keeping" in caplog.text
    big = root / "x1" / "big.png"
    big.write_bytes(PICTURE.read_bytes() + b"x" * 20_000)
    assert store.keep_media(big) is None and all(store.media_file(n) for n in de + c)


def test_a_pipe_or_folder_among_the_tabs_files_holds_nothing_up(workspace, uploads, monkeypatch, caplog):
    """A named pipe at pages/<id>.json held the page load that read it, and every later sweep, for good (its size
    is 0, so the size bound let it through); a folder named like a tab's file broke the pruning of old tabs."""
    import os
    import threading

    jobs = JobManager(workspace.runs_dir, [sys.executable, str(FAKE_ENGINE)])
    board = Board(workspace=workspace, jobs=jobs)
    store = page_memory.PageMemory(workspace.root, max_pages=2)
    monkeypatch.setitem(page_memory._STORES, str(workspace.root), store)
    store.folder.mkdir(parents=True)
    os.mkfifo(store.folder / f"{PAGE}.json")
    (store.folder / f"{'c' * 32}.json").mkdir()
    done = []

    def tab_work():
        page_memory.restore(board, PAGE, "en", False)
        for n in range(3):
            page_memory.save_chat(board, str(n) * 32, [{"role": "user", "content": f"page {n}"}], [], {})
        store.prune(force_sweep=True)
        done.append(True)

    with caplog.at_level(logging.WARNING, logger="app.page_memory"):
        worker = threading.Thread(target=tab_work, daemon=True)
        worker.start()
        worker.join(20)
    assert done, "a page load or save waited on the pipe"
    assert store.read("2" * 32)["chat"]["convo"] == [{"role": "user", "content": "page 2"}]
    assert f"{PAGE}.json" in caplog.text


def test_a_link_planted_under_a_copys_temp_name_is_never_written_through(board, uploads, tmp_path):
    """A kept picture is shown again from a copy in gradio's upload folder (under /tmp, which any user of the machine
    can write to), made through a temp file whose name was known in advance (the picture's digest): a link planted
    under it had the user's file overwritten with the picture."""
    root, image = uploads
    page_memory.save_chat(board, PAGE, picture_convo(image), [], {})
    name = page_memory.media_names(page_memory.memory(board).read(PAGE)["chat"]["convo"])[0]
    mine = tmp_path / "notes.txt"
    mine.write_text("keep me\n")
    shown = root / "lfboard-pages"
    shown.mkdir(parents=True, exist_ok=True)
    (shown / f".{name}.tmp").symlink_to(mine)
    main = page_memory.restore_chat(board, page_memory.memory(board).read(PAGE)["chat"], "en")[0]
    again = Path(main[0]["content"][0][chat_media.DISPLAY_KEY])
    assert again.read_bytes() == PICTURE.read_bytes() and not again.is_symlink()
    assert mine.read_text() == "keep me\n"


@pytest.mark.parametrize("linked", ["pages", "media"])
def test_pages_or_media_linked_to_a_folder_of_the_users_is_never_pruned(workspace, uploads, monkeypatch, tmp_path,
                                                                        linked):
    """A workspace copied from elsewhere could hold pages/ or pages/media as a link to a folder of the user's: pruning
    old tabs removed all but the newest 63 .json files there, and sweeping unused media removed every file there."""
    import os
    import time

    root, image = uploads
    mine = tmp_path / "mine"
    mine.mkdir()
    for n in range(5):
        (mine / f"settings{n}.json").write_text("{}")
        os.utime(mine / f"settings{n}.json", (time.time() - 1000 * n,) * 2)
    (mine / "holiday.png").write_bytes(b"photo")
    jobs = JobManager(workspace.runs_dir, [sys.executable, str(FAKE_ENGINE)])
    board = Board(workspace=workspace, jobs=jobs)
    store = page_memory.PageMemory(workspace.root, max_pages=2)
    monkeypatch.setitem(page_memory._STORES, str(workspace.root), store)
    if linked == "pages":
        store.folder.parent.mkdir(parents=True, exist_ok=True)
        store.folder.symlink_to(mine)
    else:
        store.folder.mkdir(parents=True)
        store.media.symlink_to(mine)
    for n in range(3):
        page_memory.save_chat(board, str(n) * 32, picture_convo(image), [], {})
    store.prune(force_sweep=True)
    assert sorted(p.name for p in mine.iterdir()) == ["holiday.png"] + [f"settings{n}.json" for n in range(5)]
