//! The parts of markdown that `bench report --check` reads: code (masked out), links
//! and their byte ranges, headings and their anchors (mdBook's rule), all through
//! `pulldown-cmark`, the parser mdBook renders with.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// The events of `text` with their byte ranges, parsed as mdBook does (tables,
/// footnotes, strikethrough, heading attributes).
fn events(text: &str) -> impl Iterator<Item = (Event<'_>, std::ops::Range<usize>)> {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_HEADING_ATTRIBUTES;
    Parser::new_ext(text, options).into_offset_iter()
}

/// `text` with every code block, inline code span and HTML comment replaced by spaces
/// (line breaks kept), so that offsets and line numbers stay those of `text`.
pub fn mask_code(text: &str) -> String {
    let mut out = text.as_bytes().to_vec();
    for (event, range) in events(text) {
        let comment = |html: &str| html.trim_start().starts_with("<!--");
        match event {
            Event::Start(Tag::CodeBlock(_)) | Event::Code(_) => blank_bytes(&mut out[range]),
            Event::Html(h) | Event::InlineHtml(h) if comment(&h) => {
                // A comment's first line starts the event; it runs to its `-->`.
                let end = text[range.start..]
                    .find("-->")
                    .map_or(text.len(), |e| range.start + e + 3);
                blank_bytes(&mut out[range.start..end]);
            }
            _ => {}
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

/// Blanks ASCII bytes and whole multi-byte characters alike, keeping line breaks; the
/// result stays valid UTF-8 because every byte of a blanked character becomes a space.
fn blank_bytes(bytes: &mut [u8]) {
    for b in bytes {
        if *b != b'\n' {
            *b = b' ';
        }
    }
}

/// A link `[text](target)` (or image) found in masked text.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    /// The link text, code spans blanked.
    pub text: String,
    /// The target without its title.
    pub target: String,
    /// Byte range of the whole link in the text.
    pub span: std::ops::Range<usize>,
    /// Byte range of the link text.
    pub text_span: std::ops::Range<usize>,
}

/// The links and images of `text` (none inside code), in the order they start:
/// `[![img](a)](b)` yields `b`'s link, then `a`'s image. A link's `text` has its code
/// spans blanked, as [`mask_code`] does.
pub fn links(text: &str) -> Vec<Link> {
    let masked = mask_code(text);
    // Links not closed yet, innermost last.
    let mut open: Vec<Open> = Vec::new();
    let mut out = Vec::new();
    for (event, range) in events(text) {
        match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                widen(&mut open, &range);
                open.push((range, dest_url.to_string(), None));
            }
            Event::End(TagEnd::Link | TagEnd::Image) => {
                if let Some((span, target, inner)) = open.pop() {
                    let text_span = inner.unwrap_or(span.start + 1..span.start + 1);
                    out.push(Link {
                        text: masked[text_span.clone()].to_string(),
                        target,
                        span,
                        text_span,
                    });
                }
            }
            _ => widen(&mut open, &range),
        }
    }
    out.sort_by_key(|l| l.span.start);
    out
}

/// A link not closed yet: its span, its target and the range of what is inside.
type Open = (
    std::ops::Range<usize>,
    String,
    Option<std::ops::Range<usize>>,
);

/// Each open link's inside grows to hold `range`.
fn widen(open: &mut [Open], range: &std::ops::Range<usize>) {
    for (_, _, inner) in open {
        *inner = Some(match inner.take() {
            Some(r) => r.start.min(range.start)..r.end.max(range.end),
            None => range.clone(),
        });
    }
}

/// mdBook's id of a heading's text (as rendered, markup gone): lowercased, whitespace to `-`, every character
/// that is not alphanumeric, `-` or `_` dropped.
fn slug(text: &str) -> String {
    text.trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_lowercase().collect::<String>())
            } else if c.is_whitespace() {
                Some("-".to_string())
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of every heading of `text`, outside code blocks, in order; a repeated
/// anchor gets `-1`, `-2`, ... as mdBook numbers them.
pub fn anchors(text: &str) -> Vec<String> {
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out = Vec::new();
    let mut heading: Option<String> = None;
    for (event, _) in events(text) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let n = seen.entry(base.clone()).or_insert(0);
                out.push(if *n == 0 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                });
                *n += 1;
            }
            _ => {}
        }
    }
    out
}

/// The 1-based line of byte `offset` in `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_follow_mdbook() {
        let one = |heading: &str| anchors(&format!("# {heading}\n")).remove(0);
        assert_eq!(
            one("Recovery: heartbeats, silent workers"),
            "recovery-heartbeats-silent-workers"
        );
        assert_eq!(
            one("`bench apps` run 3: kernel 1"),
            "bench-apps-run-3-kernel-1"
        );
        assert_eq!(one("ring-run11"), "ring-run11");
        assert_eq!(one("snake_case and CAPS"), "snake_case-and-caps");
        assert_eq!(one("A [link](x.md) here"), "a-link-here");
        let text = "# Top\n\n```\n# not a heading\n```\n## Top\n### dup\n### dup\n";
        assert_eq!(anchors(text), ["top", "top-1", "dup", "dup-1"]);
    }

    #[test]
    fn code_is_masked_and_lines_kept() {
        let text = "a 1.5× b\n```sh\nx 2.0× y\n```\nc `3.0×` d\n<!-- 4.0× -->\n";
        let masked = mask_code(text);
        assert_eq!(masked.len(), text.len());
        assert_eq!(masked.lines().count(), text.lines().count());
        assert!(masked.contains("1.5×"));
        assert!(!masked.contains("2.0×") && !masked.contains("3.0×") && !masked.contains("4.0×"));
    }

    #[test]
    fn links_with_titles_nesting_and_line_breaks() {
        let text =
            "see [1.52×\nfaster](bench/results/elastic-run1/ \"t\") and [![i](a.png)](b.md#x)";
        let found = links(text);
        let targets: Vec<&str> = found.iter().map(|l| l.target.as_str()).collect();
        assert_eq!(targets, ["bench/results/elastic-run1/", "b.md#x", "a.png"]);
        assert_eq!(found[0].text, "1.52×\nfaster");
        assert_eq!(line_of(text, found[1].span.start), 2);
    }
}
