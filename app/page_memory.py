"""What a browser tab keeps across a reload and a board restart: its chat conversation and its History selection.

``gr.State`` lives in the board's memory for one page load: a reload (or a board restart under an open page) started
the tab over with an empty chat and nothing picked in History. Each browser tab now has an id of its own, kept in the
tab's ``sessionStorage`` (it survives a reload, and another tab never sees it: two tabs keep their own conversations)
and sent to the board as the page loads (:data:`PAGE_ID_JS`). The board keeps a small JSON file per tab id in the
workspace (``pages/<id>.json``, written atomically, at most :data:`MAX_PAGES` of them, the oldest pruned, each at most
:data:`MAX_BYTES`); the pictures, audio and video a conversation refers to are copied into ``pages/media/`` (named by
their content) so that they outlive gradio's upload cache and a restart. The file holds what the page showed: the
messages (media by name, never their bytes), the system prompt, tools and sampling settings they were sent with, the
chat workers' run ids and the model and adapter they served, whether the chat compares with the base model side by
side, and the runs picked in History. No API
key is ever in it (the workers' keys stay in their run folders) and the board's secrets are redacted from the text.

A file that is corrupt, too big or of an unknown shape is ignored with a log line: the tab starts empty.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from app import chat_media
from app.context import Board
from app.i18n import t
from app.lang_gate import LANG_UNKNOWN
from app.page_id_script import PAGE_ID_JS, PAGE_ID_THEN_JS, STORAGE_KEY  # noqa: F401 (the page's id)

logger = logging.getLogger(__name__)

FOLDER = "pages"
MAX_PAGES = 64
MAX_BYTES = 512 * 1024
SWEEP_SECONDS = 300.0
MAX_MEDIA_BYTES = 2 << 30
"""The most bytes ``pages/media`` holds (each upload is bounded by ``--max-upload-mb``, the tabs by MAX_PAGES, but
the media of 64 tabs' conversations were not): a medium that would pass it makes room by removing the oldest tabs'
media first (their text stays; a reload shows them without it), and is not kept when only live tabs' remain."""
LIVE_SECONDS = 600.0
"""A tab whose file was saved this recently is live (open in a browser): its media are never removed for room."""
_PAGE_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
_MEDIA_NAME = re.compile(r"^[0-9a-f]{64}(\.[a-z0-9]{1,8})?$")
ROLES = ("user", "assistant", "tool", "system")



def valid_page_id(page_id: Any) -> bool:
    return isinstance(page_id, str) and bool(_PAGE_ID.match(page_id))


class TooBig(ValueError):
    """What a tab keeps would make its file larger than the bound."""


class PageMemory:
    """The workspace's ``pages/`` folder: one JSON file per browser tab, and the media its conversation shows."""

    def __init__(self, root: Path, max_pages: int = MAX_PAGES, max_bytes: int = MAX_BYTES,
                 max_media_bytes: int = MAX_MEDIA_BYTES):
        self.folder = Path(root) / FOLDER
        self.media = self.folder / "media"
        self.max_pages, self.max_bytes, self.max_media_bytes = max_pages, max_bytes, max_media_bytes
        self.lock = threading.RLock()
        self.copied: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) -> media name
        self.last_sweep = float("-inf")
        self.warned = False

    def own_folders(self) -> bool:
        """Whether ``pages/`` and ``pages/media`` (where they exist) are folders of the workspace, not links: a
        workspace copied from elsewhere could hold them as links to folders of the user's, whose files pruning old
        tabs and sweeping unused media would remove. Page memory is off while one is a link (said once)."""
        if not (self.folder.is_symlink() or self.media.is_symlink()):
            return True
        if not self.warned:
            logger.warning("%s or its media folder is a link: tabs' conversations are not kept (nothing is written or "
                           "removed there); replace it with a folder of its own", self.folder)
            self.warned = True
        return False

    def path(self, page_id: str) -> Path:
        if not valid_page_id(page_id):
            raise ValueError(f"not a page id: {page_id!r}")
        return self.folder / f"{page_id}.json"

    def read(self, page_id: str) -> dict[str, Any]:
        """What the tab kept ({} for a tab never seen, and for a file that is unreadable, corrupt or too big)."""
        if not valid_page_id(page_id):
            return {}
        from engine.runs import read_regular

        path = self.path(page_id)
        try:  # a regular file only (a named pipe put there held every page load and sweep), read up to the bound
            raw = read_regular(path, max_bytes=self.max_bytes + 1)
            if len(raw) > self.max_bytes:
                logger.warning("ignoring %s: %d bytes, above the %d a page keeps", path, path.stat().st_size,
                               self.max_bytes)
                return {}
            data = json.loads(raw.decode("utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as err:
            logger.warning("ignoring %s: not readable as JSON (%s)", path, err)
            return {}
        if not isinstance(data, dict):
            logger.warning("ignoring %s: not a JSON object", path)
            return {}
        return data

    def save(self, page_id: str, key: str, value: Any) -> bool:
        """Keep ``value`` under ``key`` for the tab (atomically; False when it could not be written).

        Raises:
            TooBig: the tab's file would grow past :attr:`max_bytes` (nothing is written).
        """
        if not valid_page_id(page_id):
            return False
        with self.lock:
            return self._write(page_id, {**self.read(page_id), key: value}, key)

    def _write(self, page_id: str, data: dict[str, Any], what: str) -> bool:
        from engine.credentials import redact
        from engine.runs import write_text_atomic

        if not self.own_folders():
            return False
        with self.lock:
            text = redact(json.dumps({**data, "saved_at": time.time()}, ensure_ascii=False))
            if len(text.encode("utf-8")) > self.max_bytes:
                raise TooBig(f"page {page_id}'s {what} takes {len(text)} bytes, above the {self.max_bytes} kept")
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                write_text_atomic(self.path(page_id), text, mode=0o600)
            except OSError as err:
                logger.warning("cannot keep page %s's %s: %s", page_id, what, err)
                return False
            self.prune(keep=page_id)
        return True

    def fork(self, page_id: Any, origin: Any) -> None:
        """A duplicated tab (``page_id``) starts as a copy of what its original (``origin``) kept, once: nothing is
        copied over a file the tab has already."""
        if not (valid_page_id(page_id) and valid_page_id(origin)) or page_id == origin:
            return
        with self.lock:
            if self.path(page_id).exists():
                return
            kept = self.read(origin)
            try:
                if kept:
                    self._write(page_id, kept, f"copy of page {origin}")
            except TooBig as err:  # (a file right at the bound, whose copy's time stamp is longer)
                logger.warning("the duplicated tab starts empty: %s", err)

    def prune(self, keep: str = "", force_sweep: bool = False) -> None:
        """Remove the oldest tabs' files beyond :attr:`max_pages` (never ``keep``'s) and, now and then, the media no
        tab refers to any more."""
        if not self.own_folders():
            return
        with self.lock:
            try:
                pages = sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
            except OSError:
                return
            removed = False
            tabs = [p for p in pages if valid_page_id(p.stem) and p.stem != keep]  # never a file of another name
            for old in tabs[self.max_pages - 1:]:
                try:
                    old.unlink(missing_ok=True)
                except OSError as err:  # a folder of that name: not a tab's file, left alone
                    logger.warning("cannot remove %s: %s", old, err)
                removed = True
            if removed or force_sweep or time.monotonic() - self.last_sweep > SWEEP_SECONDS:
                self.sweep_media()

    def sweep_media(self) -> None:
        self.last_sweep = time.monotonic()
        if not self.own_folders():
            return
        used: set[str] = set()
        for page in self.folder.glob("*.json"):
            data = self.read(page.stem) if valid_page_id(page.stem) else {}
            chat = data.get("chat") if isinstance(data.get("chat"), dict) else {}
            for side in ("convo", "convo_base"):
                used.update(media_names(chat.get(side)))
        for path in self.media.glob("*") if self.media.is_dir() else ():
            if path.name not in used and _MEDIA_NAME.match(path.name):  # a medium this memory kept, no other file
                path.unlink(missing_ok=True)
        self.copied = {k: v for k, v in self.copied.items() if v in used}

    def keep_media(self, source: Path, protect: set[str] | None = None) -> str | None:
        """Copy an uploaded file into ``pages/media`` (once per content); its name there, None when unreadable or
        when it does not fit :attr:`max_media_bytes` (see :meth:`make_room`). ``protect``: the names the
        conversation being kept refers to so far (never removed for room); this one's name is added to it."""
        protect = set() if protect is None else protect
        if not self.own_folders():
            return None
        try:
            stat = source.stat()
            key = (str(source), stat.st_size, int(stat.st_mtime_ns))
            if key in self.copied and (self.media / self.copied[key]).is_file():
                protect.add(self.copied[key])
                return self.copied[key]
            digest = hashlib.sha256()
            with open(source, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            suffix = source.suffix.lower() if re.fullmatch(r"\.[a-z0-9]{1,8}", source.suffix.lower()) else ""
            name = digest.hexdigest() + suffix
            if not (self.media / name).is_file():
                with self.lock:
                    if not self.make_room(stat.st_size, protect):
                        logger.warning("not keeping %s (%d bytes) for the page's conversation: pages/media would "
                                       "pass its %d bytes with the media of open tabs alone", source, stat.st_size,
                                       self.max_media_bytes)
                        return None
            _copy_once(source, self.media / name)
        except OSError as err:
            logger.warning("cannot keep %s for the page's conversation: %s", source, err)
            return None
        self.copied[key] = name
        protect.add(name)
        return name

    def make_room(self, size: int, protect: set[str]) -> bool:
        """Whether ``size`` more bytes fit in ``pages/media`` under :attr:`max_media_bytes`, once the media of the
        oldest tabs are removed as needed (the least recently used first: those no tab refers to, then those only
        the oldest tabs refer to). Never removed: ``protect`` and what a live tab (:data:`LIVE_SECONDS`) refers to."""
        if size > self.max_media_bytes:  # nothing removed for a file that cannot fit anyway
            return False
        files = {p.name: p.stat().st_size for p in self.media.iterdir() if p.is_file()} if self.media.is_dir() else {}
        total = sum(files.values())
        if total + size <= self.max_media_bytes:
            return True
        last_used: dict[str, float] = {}
        keep = set(protect)
        now = time.time()
        for page in self.folder.glob("*.json"):
            try:
                saved = page.stat().st_mtime
            except OSError:
                continue
            data = self.read(page.stem) if valid_page_id(page.stem) else {}
            chat = data.get("chat") if isinstance(data.get("chat"), dict) else {}
            for name in media_names(chat.get("convo")) + media_names(chat.get("convo_base")):
                last_used[name] = max(last_used.get(name, saved), saved)
                if now - saved < LIVE_SECONDS:
                    keep.add(name)
        for name in sorted(files, key=lambda n: last_used.get(n, float("-inf"))):
            if total + size <= self.max_media_bytes:
                break
            if name in keep or not _MEDIA_NAME.match(name):  # (a copy being written, a file of another name)
                continue
            (self.media / name).unlink(missing_ok=True)
            total -= files[name]
            self.copied = {k: v for k, v in self.copied.items() if v != name}
            logger.info("removed %s from %s to make room (the oldest tabs' media go first)", name, self.media)
        return total + size <= self.max_media_bytes

    def media_file(self, name: Any) -> Path | None:
        if not isinstance(name, str) or not _MEDIA_NAME.match(name):
            return None
        path = self.media / name
        return path if path.is_file() else None


_STORES: dict[str, PageMemory] = {}
_STORES_LOCK = threading.Lock()


def memory(board: Board) -> PageMemory:
    """The board's page memory (one per workspace)."""
    key = str(board.workspace.root)
    with _STORES_LOCK:
        if key not in _STORES:
            _STORES[key] = PageMemory(board.workspace.root)
        return _STORES[key]


def media_names(convo: Any) -> list[str]:
    names = []
    for msg in convo if isinstance(convo, list) else []:
        content = msg.get("content") if isinstance(msg, dict) else None
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and isinstance(part.get("media"), str):
                names.append(part["media"])
    return names


def stored_convo(store: PageMemory, convo: Any, protect: set[str] | None = None) -> list[dict[str, Any]]:
    """A conversation as the page file keeps it: each medium by its name in ``pages/media`` instead of its bytes
    (``protect`` collects the names, which making room for the next one must not remove)."""
    protect = set() if protect is None else protect
    out = []
    for msg in convo or []:
        content = msg.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                kind = chat_media.part_kind(part)
                if kind is None:
                    parts.append({k: v for k, v in part.items() if k != chat_media.DISPLAY_KEY})
                    continue
                name = store.keep_media(Path(str(part.get(chat_media.DISPLAY_KEY) or "")), protect)
                if name:
                    parts.append({"type": part["type"], "media": name})
            msg = {**msg, "content": parts}
        out.append(msg)
    return out


def restored_convo(store: PageMemory, convo: Any, upload_root: Path) -> list[dict[str, Any]] | None:
    """A kept conversation as the page holds it (media read back inline, shown from a copy in gradio's upload
    folder); None when it is not a list of messages."""
    if not isinstance(convo, list) or not all(valid_message(m) for m in convo):
        return None
    out = []
    for msg in convo:
        content = msg.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                kind = chat_media.part_kind(part)
                if kind is None:
                    parts.append(part)
                    continue
                shown = shown_copy(store, part.get("media"), upload_root)
                if shown is None:
                    logger.warning("a kept conversation's %s (%s) is gone; shown without it", kind, part.get("media"))
                    continue
                parts.append(chat_media.media_part(kind, shown))
            msg = {**msg, "content": parts}
        out.append(msg)
    return out


def valid_message(msg: Any) -> bool:
    if not isinstance(msg, dict) or msg.get("role") not in ROLES:
        return False
    content = msg.get("content")
    if isinstance(content, list):
        return all(isinstance(p, dict) and isinstance(p.get("type"), str) for p in content)
    return content is None or isinstance(content, str)


def _copy_once(source: Path, target: Path) -> None:
    """``source`` copied to ``target`` (its name is its content's digest) unless there already: through a temporary
    file renamed into place, so a reader never sees half a file."""
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        # a new temp file of a random name (never a link planted under a name known in advance: gradio's upload
        # folder is under /tmp, which other users of the machine can write to)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
        try:
            shutil.copyfile(source, tmp)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def shown_copy(store: PageMemory, name: Any, upload_root: Path) -> Path | None:
    """A kept medium copied into gradio's upload folder (where the chatbot may show files from)."""
    source = store.media_file(name)
    if source is None:
        return None
    target = Path(upload_root) / "lfboard-pages" / source.name
    try:
        _copy_once(source, target)
    except OSError as err:
        logger.warning("cannot show %s: %s", source, err)
        return None
    return target


@dataclass
class PageSlots:
    """The tab's id and the id of the tab it is a duplicate of (both set by the page as it loads), and whether its
    kept state was brought back yet."""

    page_id: gr.Textbox
    restored: gr.State
    origin: gr.Textbox


def build() -> PageSlots:
    return PageSlots(page_id=gr.Textbox("", visible=False, elem_id="lf-page-id"), restored=gr.State(False),
                     origin=gr.Textbox("", visible=False, elem_id="lf-page-origin"))


def save_chat(board: Board, page_id: str, convo: Any, convo_base: Any, servers: Any, restored: bool = True,
              settings: dict[str, Any] | None = None) -> None:
    """Keep the tab's conversation (after each change: a message, each streamed piece of a reply, Clear) and the
    ``settings`` it is sent with (:func:`chat_settings`). Nothing
    is kept before the page load has brought back what the tab kept (``restored``): the empty conversation a page
    starts with must not overwrite it."""
    from app.chat_status import served

    if not restored or not valid_page_id(page_id):
        return
    store = memory(board)
    with store.lock:
        before = store.read(page_id).get("chat")
        before = before if isinstance(before, dict) else {}
        servers = {s: r for s, r in (servers or {}).items() if isinstance(r, str)}
        model, adapter = before.get("model"), before.get("adapter")
        if servers.get("main"):
            try:
                model, adapter = served(board, servers["main"])
            except Exception:  # noqa: BLE001 - a worker folder gone meanwhile: the model it was with stays
                pass
        kept: set[str] = set()  # this tab's media: making room for one never removes another
        main, base = stored_convo(store, convo, kept), stored_convo(store, convo_base, kept)
        while True:  # the oldest turns go first when the conversation outgrows the page's file
            record = {"convo": main, "convo_base": base, "servers": servers, "model": model, "adapter": adapter,
                      "settings": settings or {}}
            try:
                store.save(page_id, "chat", record)
                return
            except TooBig as err:
                if not (main or base):
                    logger.warning("not keeping the conversation: %s", err)
                    return
                main, base = main[1:], base[1:]


def restore_chat(board: Board, chat: Any, lang: str) -> tuple[Any, ...]:
    """(convo, convo_base, chatbot, chatbot_base) of a kept conversation (all skipped when none)."""
    from app.tabs.chat import box_label, to_chatbot, upload_folder

    skips = (gr.skip(),) * 4
    if not isinstance(chat, dict):
        return skips
    store = memory(board)
    main = restored_convo(store, chat.get("convo", []), Path(upload_folder()))
    base = restored_convo(store, chat.get("convo_base", []), Path(upload_folder()))
    if main is None or base is None:
        logger.warning("ignoring a kept conversation of an unknown shape in %s", store.folder)
        return skips
    if not main and not base:
        return skips
    lang = lang if lang != LANG_UNKNOWN else "en"  # (the tool turns are titled again as the language arrives)
    shown = {"value": to_chatbot(main, lang)}
    if unloaded_model(board, chat):  # a live worker: the page load's own line names it, and the label follows it
        shown["label"] = box_label(chat.get("adapter") if isinstance(chat.get("adapter"), str) else "")["label"]
    return (main, base, gr.update(**shown),
            gr.update(value=to_chatbot(base, lang), visible=True) if base else gr.skip())


def unloaded_model(board: Board, chat: Any) -> str | None:
    """The model (and adapter) a kept conversation was with, when no chat model is loaded now (else None)."""
    from app import chat_workers

    model = chat.get("model") if isinstance(chat, dict) else None
    if not isinstance(model, str) or not model or not (chat.get("convo") or chat.get("convo_base")):
        return None
    if any(not chat_workers.unloading(info) for info in chat_workers.live_chat_runs(board)):
        return None
    adapter = chat.get("adapter")
    return f"{model} + {adapter}" if isinstance(adapter, str) and adapter else model


def restore_selection(board: Board, kept: Any, lang: str) -> Any:
    """The History picker with the runs the tab had picked (those that still exist), or skip."""
    from app.tabs.runs import run_choices, table_frame

    picked = kept.get("selected") if isinstance(kept, dict) else None
    if not isinstance(picked, list) or not picked:
        return gr.skip()
    _, ids = table_frame(board, lang if lang != LANG_UNKNOWN else "en")
    keep = [run_id for run_id in picked if isinstance(run_id, str) and run_id in ids]
    return gr.update(choices=run_choices(ids), value=keep) if keep else gr.skip()


def restore(board: Board, page_id: str, lang: str, restored: Any, fields: dict[str, Any] | None = None,
            origin: str = "") -> tuple:
    """Bring back what the tab kept, once per page load, as soon as its id is known (``restored`` becomes "kept");
    the line that names the model a conversation was with waits for the page's language (then ``restored`` is
    True). Outputs: restored, convo, convo_base, chatbot, chatbot_base, status, the History picker, the chat's
    "side by side" box, and its system prompt, tools and ``fields`` (its sampling settings, by key). A duplicated
    tab (``origin``: the tab it was duplicated from) starts with a copy of what its original kept."""
    fields = fields or {}
    skips = (gr.skip(),) * (10 + len(fields))
    if restored is True or not valid_page_id(page_id) or (restored and lang == LANG_UNKNOWN):
        return skips
    memory(board).fork(page_id, origin)
    data = memory(board).read(page_id)
    chat, settings = data.get("chat"), (gr.skip(),) * (2 + len(fields))
    if restored:
        kept = (gr.skip(),) * 6
    else:
        compare = data.get("compare")
        kept = (*restore_chat(board, chat, lang), restore_selection(board, data.get("history"), lang),
                compare if isinstance(compare, bool) else gr.skip())
        if kept[0] != gr.skip():  # the settings it was sent with come back with the conversation
            settings = restore_settings(chat.get("settings"), fields)
    status = gr.skip()
    if lang != LANG_UNKNOWN:
        model = unloaded_model(board, chat)
        status = t(lang, "chat_restored_unloaded", model=model) if model else gr.skip()
    return ("kept" if lang == LANG_UNKNOWN else True, *kept[:4], status, *kept[4:], *settings)


def chat_settings(system: Any, tools: Any, keys: list[str], values: tuple) -> dict[str, Any]:
    """The chat's system prompt, tools and sampling settings as the page file keeps them."""
    numbers = {k: v for k, v in zip(keys, values) if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {"system": system if isinstance(system, str) else "", "tools": tools if isinstance(tools, str) else "",
            "values": numbers}


def restore_settings(kept: Any, fields: dict[str, Any]) -> tuple[Any, ...]:
    """(system prompt, tools, *sampling values) as kept; a missing or out-of-range one is left as it is."""
    kept = kept if isinstance(kept, dict) else {}
    values = kept.get("values") if isinstance(kept.get("values"), dict) else {}
    out: list[Any] = [kept[k] if isinstance(kept.get(k), str) else gr.skip() for k in ("system", "tools")]
    for key, widget in fields.items():
        value = values.get(key)
        low, high = getattr(widget, "minimum", None), getattr(widget, "maximum", None)
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
        ok = number and (low is None or value >= low) and (high is None or value <= high)
        out.append(value if ok else gr.skip())
    return tuple(out)


def save_selection(board: Board, page_id: str, selected: Any, restored: bool = True) -> None:
    if restored and valid_page_id(page_id):
        picked = [s for s in selected or [] if isinstance(s, str)] if isinstance(selected, list) else []
        try:
            memory(board).save(page_id, "history", {"selected": picked})
        except TooBig as err:
            logger.warning("not keeping the History selection: %s", err)


def save_compare(board: Board, page_id: str, compare: Any, restored: bool = True) -> None:
    """Keep the chat's "side by side with the base model" box as the user set it."""
    if restored and valid_page_id(page_id) and isinstance(compare, bool):
        try:
            memory(board).save(page_id, "compare", compare)
        except TooBig as err:
            logger.warning("not keeping the side-by-side box: %s", err)


def wire(slots: PageSlots, board: Board, demo: gr.Blocks, lang: gr.components.Component, chat_tab: Any,
         runs_tab: Any) -> None:
    """The tab's id as the page loads, what it kept brought back, and each change kept."""
    private: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}
    demo.load(None, None, slots.origin, js=PAGE_ID_JS, **private).then(None, None, slots.page_id, js=PAGE_ID_THEN_JS,
                                                                        **private)
    fields = dict(chat_tab.fields)
    gr.on([slots.page_id.change, lang.change], lambda page_id, lang_code, restored, origin: restore(
          board, page_id, lang_code, restored, fields=fields, origin=origin),
          [slots.page_id, lang, slots.restored, slots.origin],
          [slots.restored, chat_tab.convo, chat_tab.convo_base, chat_tab.chatbot, chat_tab.chatbot_base,
           chat_tab.status, runs_tab.selected, chat_tab.compare, chat_tab.system, chat_tab.tools, *fields.values()],
          queue=False, trigger_mode="multiple", **private)
    kept = {"queue": False, "trigger_mode": "always_last", **private}

    def on_chat(page_id, convo, convo_base, servers, restored, system, tools, *values):
        save_chat(board, page_id, convo, convo_base, servers, restored, chat_settings(system, tools, list(fields), values))

    gr.on([chat_tab.convo.change, chat_tab.convo_base.change], on_chat,
          [slots.page_id, chat_tab.convo, chat_tab.convo_base, chat_tab.servers, slots.restored, chat_tab.system,
           chat_tab.tools, *fields.values()], None, **kept)
    runs_tab.selected.change(lambda *a: save_selection(board, *a), [slots.page_id, runs_tab.selected, slots.restored],
                             None, **kept)
    chat_tab.compare.input(lambda *a: save_compare(board, *a), [slots.page_id, chat_tab.compare, slots.restored], None,
                           **kept)
