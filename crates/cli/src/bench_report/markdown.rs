//! The parts of markdown that `bench report --check` reads: code (masked out), inline
//! links and their byte ranges, headings and their anchors (mdBook's rule).

/// `text` with every code block, inline code span and HTML comment replaced by spaces
/// (line breaks kept), so that offsets and line numbers stay those of `text`.
pub fn mask_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        let opens = indent <= 3
            && marker.len() >= 3
            && marker
                .chars()
                .all(|c| c == marker.chars().next().unwrap_or('`'));
        match &fence {
            Some(open) => {
                if opens
                    && marker.starts_with(open.as_str())
                    && trimmed[marker.len()..].trim().is_empty()
                {
                    fence = None;
                }
                out.push_str(&blank(line));
            }
            None if opens => {
                fence = Some(marker);
                out.push_str(&blank(line));
            }
            None => out.push_str(line),
        }
    }
    mask_inline(&out)
}

/// Spaces for every character of `s` but line breaks (byte length kept).
fn blank(s: &str) -> String {
    s.bytes()
        .map(|b| if b == b'\n' { '\n' } else { ' ' })
        .collect()
}

/// Masks inline code spans (a run of backticks to the next run of the same length,
/// not across a blank line) and HTML comments.
fn mask_inline(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"<!--") {
            let end = text[i..].find("-->").map_or(bytes.len(), |e| i + e + 3);
            blank_bytes(&mut out[i..end]);
            i = end;
            continue;
        }
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|&&b| b == b'`').count();
        let mut j = i + run;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j..].starts_with(b"\n\n") {
                break;
            }
            if bytes[j] == b'`' {
                let r = bytes[j..].iter().take_while(|&&b| b == b'`').count();
                if r == run {
                    close = Some(j + r);
                    break;
                }
                j += r;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                blank_bytes(&mut out[i..end]);
                i = end;
            }
            None => i += run,
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

/// An inline link `[text](target)` (or image) found in masked text.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    /// The link text, as written.
    pub text: String,
    /// The target without its title, as written.
    pub target: String,
    /// Byte range of the whole link in the text.
    pub span: std::ops::Range<usize>,
    /// Byte range of the link text.
    pub text_span: std::ops::Range<usize>,
}

/// The inline links of `masked` (text already through [`mask_code`]). Nested brackets
/// in the text are allowed (`[![img](a)](b)` yields both links); a link text does not
/// cross a blank line.
pub fn links(masked: &str) -> Vec<Link> {
    let bytes = masked.as_bytes();
    let mut out = Vec::new();
    for open in 0..bytes.len() {
        if bytes[open] != b'[' || (open > 0 && bytes[open - 1] == b'\\') {
            continue;
        }
        let mut depth = 0usize;
        let mut close = None;
        let mut j = open;
        while j < bytes.len() {
            match bytes[j] {
                b'[' => depth += 1,
                b']' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(j);
                        break;
                    }
                }
                b'\n' if bytes.get(j + 1) == Some(&b'\n') => break,
                _ => {}
            }
            j += 1;
        }
        let Some(close) = close else { continue };
        if bytes.get(close + 1) != Some(&b'(') {
            continue;
        }
        let mut parens = 0usize;
        let mut end = None;
        for (k, &b) in bytes.iter().enumerate().skip(close + 1) {
            match b {
                b'(' => parens += 1,
                b')' => {
                    parens -= 1;
                    if parens == 0 {
                        end = Some(k);
                        break;
                    }
                }
                b'\n' if bytes.get(k + 1) == Some(&b'\n') => break,
                _ => {}
            }
        }
        let Some(end) = end else { continue };
        let inner = masked[close + 2..end].trim();
        let target = if let Some(rest) = inner.strip_prefix('<') {
            rest.split('>').next().unwrap_or("")
        } else {
            inner.split_whitespace().next().unwrap_or("")
        };
        out.push(Link {
            text: masked[open + 1..close].to_string(),
            target: target.to_string(),
            span: open..end + 1,
            text_span: open + 1..close,
        });
    }
    out
}

/// The anchor mdBook gives a heading: its text without markup, lowercased, whitespace
/// to `-`, every character that is not alphanumeric, `-` or `_` dropped.
pub fn anchor(heading: &str) -> String {
    plain(heading)
        .trim()
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

/// Heading text without markup: links become their text, emphasis and code marks go.
pub fn plain(text: &str) -> String {
    let mut out = text.to_string();
    for link in links(text).iter().rev() {
        if link.span.start >= out.len() {
            continue;
        }
        let inner = &text[link.text_span.clone()];
        out.replace_range(link.span.clone(), inner);
    }
    out.replace(['`', '*'], "")
}

/// The anchors of every ATX heading (`#` to `######`) of `text`, outside code blocks, in
/// order; a repeated anchor gets `-1`, `-2`, ... as mdBook numbers them.
pub fn anchors(text: &str) -> Vec<String> {
    let masked_fences = mask_fences_only(text);
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for line in masked_fences.lines() {
        let trimmed = line.trim_start();
        let hashes = trimmed.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || line.len() - trimmed.len() > 3 {
            continue;
        }
        let rest = &trimmed[hashes..];
        if !(rest.is_empty() || rest.starts_with(' ')) {
            continue;
        }
        let base = anchor(rest.trim().trim_end_matches('#'));
        let n = seen.entry(base.clone()).or_insert(0);
        out.push(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// `text` with fenced code blocks blanked but inline code kept (heading text needs it).
fn mask_fences_only(text: &str) -> String {
    let mut out = String::new();
    let mut in_fence = false;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            out.push_str(&blank(line));
        } else if in_fence {
            out.push_str(&blank(line));
        } else {
            out.push_str(line);
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
        assert_eq!(
            anchor("Recovery: heartbeats, silent workers"),
            "recovery-heartbeats-silent-workers"
        );
        assert_eq!(
            anchor("`bench apps` run 3: kernel 1"),
            "bench-apps-run-3-kernel-1"
        );
        assert_eq!(anchor("ring-run11"), "ring-run11");
        assert_eq!(anchor("snake_case and CAPS"), "snake_case-and-caps");
        assert_eq!(anchor("A [link](x.md) here"), "a-link-here");
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
