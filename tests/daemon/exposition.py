"""An independent checker of the Prometheus text exposition format 0.0.4,
written from the format's description (not from gpured's renderer), for
where promtool is not installed (Debian's prometheus package, which has
it, takes some 300 MiB with what it depends on).

check(text) returns a list of problems (empty when the text is valid) and
parse(text) the samples, {(name, ((label, value), ...)): float}.

Rules checked: UTF-8 and a final line feed; metric and label names;
label values quoted with only \\\\, \\" and \\n escaped; HELP and TYPE at
most once per family, TYPE before the family's samples and one of the
five types; a family's samples together; values that parse as floats;
no series twice; counters not negative, named ..._total; histograms with
_bucket series whose le labels rise to +Inf, counts that never fall, and
a +Inf bucket equal to _count, plus _sum.
"""

import math
import re

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_float(s):
    """A sample value as Go's ParseFloat takes it (what Prometheus uses)."""
    if s in ("+Inf", "Inf", "inf", "+inf"):
        return math.inf
    if s in ("-Inf", "-inf"):
        return -math.inf
    if s in ("NaN", "nan"):
        return math.nan
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", s):
        raise ValueError("not a number: %r" % s)
    return float(s)


def _labels(s, pos, where, errors):
    """Parse {a="b",...} starting at s[pos] == '{'; (labels, next pos)."""
    labels = []
    pos += 1
    while True:
        if pos < len(s) and s[pos] == "}":
            return tuple(labels), pos + 1
        m = re.match(r"[a-zA-Z_][a-zA-Z0-9_]*", s[pos:])
        if not m:
            errors.append("%s: bad label name at %r" % (where, s[pos:pos + 20]))
            return None, pos
        name = m.group(0)
        if name.startswith("__"):
            errors.append("%s: label name %s is reserved" % (where, name))
        pos += len(name)
        if s[pos:pos + 2] != '="':
            errors.append("%s: label %s: want =\"" % (where, name))
            return None, pos
        pos += 2
        value = []
        while True:
            if pos >= len(s):
                errors.append("%s: label %s: unterminated value" % (where, name))
                return None, pos
            c = s[pos]
            if c == "\\":
                nxt = s[pos + 1:pos + 2]
                if nxt not in ("\\", '"', "n"):
                    errors.append("%s: label %s: bad escape \\%s" % (where, name, nxt))
                value.append({"n": "\n"}.get(nxt, nxt))
                pos += 2
            elif c == '"':
                pos += 1
                break
            elif c == "\n":
                errors.append("%s: label %s: raw line feed" % (where, name))
                pos += 1
            else:
                value.append(c)
                pos += 1
        if any(n == name for n, _ in labels):
            errors.append("%s: label %s twice" % (where, name))
        labels.append((name, "".join(value)))
        if pos < len(s) and s[pos] == ",":
            pos += 1
        elif pos < len(s) and s[pos] == "}":
            continue
        else:
            errors.append("%s: want , or } after label %s" % (where, name))
            return None, pos


def _family_of(name, types):
    """The family a sample belongs to: itself, or a histogram/summary's."""
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix):
            base = name[: -len(suffix)]
            if types.get(base) in ("histogram", "summary"):
                return base
    return name


def _parse(text, errors):
    samples = {}
    order = []  # (family, name, labels, value) in order
    types, helps = {}, {}
    seen_families = []  # in order of first sample, to find interleaving
    if not text.endswith("\n"):
        errors.append("the text does not end with a line feed")
    for lineno, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), 1):
        where = "line %d" % lineno
        if line.strip() == "":
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 2 and parts[1] in ("HELP", "TYPE"):
                if len(parts) < 3:
                    errors.append("%s: %s without a metric name" % (where, parts[1]))
                    continue
                name = parts[2]
                if not METRIC_NAME.match(name):
                    errors.append("%s: bad metric name %r" % (where, name))
                if parts[1] == "HELP":
                    if name in helps:
                        errors.append("%s: second HELP for %s" % (where, name))
                    doc = parts[3] if len(parts) > 3 else ""
                    if re.search(r"\\[^\\n]", doc.replace("\\\\", "")):
                        errors.append("%s: HELP of %s has an escape other than \\\\ and \\n" % (where, name))
                    helps[name] = doc
                else:
                    t = parts[3].strip() if len(parts) > 3 else ""
                    if t not in TYPES:
                        errors.append("%s: %s has unknown type %r" % (where, name, t))
                    if name in types:
                        errors.append("%s: second TYPE for %s" % (where, name))
                    if name in seen_families:
                        errors.append("%s: TYPE for %s after its samples" % (where, name))
                    types[name] = t
            continue
        m = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
        if not m:
            errors.append("%s: bad metric name in %r" % (where, line[:40]))
            continue
        name = m.group(0)
        pos = len(name)
        labels = ()
        if pos < len(line) and line[pos] == "{":
            labels, pos = _labels(line, pos, where, errors)
            if labels is None:
                continue
        rest = line[pos:]
        if not rest.startswith(" "):
            errors.append("%s: want a space before the value of %s" % (where, name))
            continue
        fields = rest.split()
        if len(fields) not in (1, 2):
            errors.append("%s: want a value and at most a timestamp: %r" % (where, rest))
            continue
        try:
            value = parse_float(fields[0])
            if len(fields) == 2:
                int(fields[1])
        except ValueError as e:
            errors.append("%s: %s" % (where, e))
            continue
        fam = _family_of(name, types)
        if seen_families and seen_families[-1] != fam:
            if fam in seen_families:
                errors.append("%s: samples of %s are not together" % (where, fam))
            seen_families.append(fam)
        elif not seen_families:
            seen_families.append(fam)
        key = (name, tuple(sorted(labels)))
        if key in samples:
            errors.append("%s: series %s%s twice" % (where, name, dict(labels)))
        samples[key] = value
        order.append((fam, name, labels, value))
    return samples, order, types, helps


def _check_families(order, types, errors):
    fams = {}
    for fam, name, labels, value in order:
        fams.setdefault(fam, []).append((name, dict(labels), value))
    for fam, rows in fams.items():
        t = types.get(fam, "untyped")
        if t == "counter":
            if not fam.endswith("_total"):
                errors.append("counter %s is not named ..._total" % fam)
            for name, labels, value in rows:
                if name != fam:
                    errors.append("counter %s has a sample named %s" % (fam, name))
                if not value >= 0:
                    errors.append("counter %s%s is %r" % (fam, labels, value))
        elif t == "gauge":
            if fam.endswith("_total"):
                errors.append("gauge %s is named like a counter" % fam)
            for name, labels, value in rows:
                if name != fam:
                    errors.append("gauge %s has a sample named %s" % (fam, name))
        elif t == "histogram":
            _check_histogram(fam, rows, errors)


def _check_histogram(fam, rows, errors):
    groups = {}
    for name, labels, value in rows:
        rest = {k: v for k, v in labels.items() if k != "le"}
        key = tuple(sorted(rest.items()))
        g = groups.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if name == fam + "_bucket":
            if "le" not in labels:
                errors.append("%s_bucket without le" % fam)
                continue
            try:
                le = parse_float(labels["le"])
            except ValueError:
                errors.append("%s_bucket le=%r is not a number" % (fam, labels["le"]))
                continue
            g["buckets"].append((le, value))
        elif name == fam + "_sum":
            g["sum"] = value
        elif name == fam + "_count":
            g["count"] = value
        else:
            errors.append("histogram %s has a sample named %s" % (fam, name))
    for key, g in groups.items():
        b = g["buckets"]
        if not b or b[-1][0] != math.inf:
            errors.append("histogram %s%s: no +Inf bucket last" % (fam, dict(key)))
            continue
        for (le0, c0), (le1, c1) in zip(b, b[1:]):
            if not le1 > le0:
                errors.append("histogram %s: le %r after %r" % (fam, le1, le0))
            if c1 < c0:
                errors.append("histogram %s: bucket le=%r count %r below le=%r's %r" % (fam, le1, c1, le0, c0))
        if g["count"] is None or g["sum"] is None:
            errors.append("histogram %s%s: _count or _sum missing" % (fam, dict(key)))
        elif g["count"] != b[-1][1]:
            errors.append("histogram %s: +Inf bucket %r != _count %r" % (fam, b[-1][1], g["count"]))
        if g["sum"] is not None and g["sum"] < 0:
            errors.append("histogram %s: negative _sum" % fam)


def check(text):
    """The problems of an exposition, as strings; [] when it is valid."""
    errors = []
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            return ["not UTF-8: %s" % e]
    _, order, types, _ = _parse(text, errors)
    # a family may have no samples (a daemon with no devices, say)
    _check_families(order, types, errors)
    return errors


def parse(text):
    """{(name, sorted label pairs): value}; raises ValueError when invalid."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    errors = []
    samples, _, _, _ = _parse(text, errors)
    if errors:
        raise ValueError("; ".join(errors))
    return samples


def value(samples, name, **labels):
    """One series' value (KeyError when absent)."""
    return samples[(name, tuple(sorted(labels.items())))]
