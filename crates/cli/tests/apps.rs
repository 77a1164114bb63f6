//! `statepipe fasta`, `statepipe knucleotide` and `statepipe graph500` as a
//! user runs them.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

fn statepipe(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_statepipe"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting statepipe");
    let mut pipe = child.stdin.take().unwrap();
    // A child that exits early may close its end first: ignore the error.
    let _ = pipe.write_all(stdin);
    drop(pipe);
    child.wait_with_output().unwrap()
}

#[test]
fn fasta_piped_into_knucleotide() {
    let fasta = statepipe(&["fasta", "1000"], b"");
    assert!(fasta.status.success());
    assert_eq!(fasta.stdout, statepipe_apps::fasta::generate(1000));
    let out = statepipe(&["knucleotide"], &fasta.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = statepipe_apps::kmer::knucleotide(&fasta.stdout, 1).unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);
}

#[test]
fn knucleotide_rejects_bad_input_with_exit_code_2() {
    for (input, message) in [
        (&b""[..], "the input is empty"),
        (b">ONE x\nACGT\n", "no `>THREE` sequence"),
        (b">THREE x\nACGT\nacNt\n", "byte 'N' at line 3, column 3"),
    ] {
        let out = statepipe(&["knucleotide"], input);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(message), "{stderr}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn graph500_prints_the_output_block_and_refuses_huge_scales() {
    let out = statepipe(&["graph500", "--scale", "8", "--roots", "4"], b"");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("NBFS:                           4"),
        "{stdout}"
    );
    let out = statepipe(&["graph500", "--scale", "31", "--edgefactor", "1024"], b"");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("needs about") && stderr.contains("MemAvailable"),
        "{stderr}"
    );
}

#[test]
fn graph500_gives_the_same_searches_wherever_the_edge_list_is_kept() {
    let nedges = |edges: &str| {
        let out = statepipe(
            &[
                "graph500", "--scale", "10", "--roots", "4", "--edges", edges,
            ],
            b"",
        );
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains("bytes per generated edge"), "{stderr}");
        stdout
            .lines()
            .filter(|l| l.contains("nedge"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let file = nedges("file");
    assert_eq!(file.len(), 7, "{file:?}");
    assert_eq!(nedges("regenerate"), file);
    assert_eq!(nedges("memory"), file);
}

#[test]
fn graph500_without_a_folder_for_its_edge_list_says_what_to_do() {
    let out = statepipe(
        &[
            "graph500",
            "--scale",
            "10",
            "--edge-dir",
            "/nonexistent/statepipe-edges",
        ],
        b"",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("/nonexistent/statepipe-edges"), "{stderr}");
    assert!(stderr.contains("--edges regenerate"), "{stderr}");
    assert!(out.stdout.is_empty());
}
