//! One cut edge on its own ([`Link`], [`RawLink`]): every item arrives, in
//! order, for any window of credits; a peer with a wrong secret or another
//! item type is refused, saying why; a sender whose receiver went away gets
//! an error, not a hang.

use proptest::prelude::*;
use statepipe_pipeline::remote::{Link, LinkListener, RawLink, RemoteError};
use statepipe_sys::auth::Secret;

fn listener(secret: &str) -> (LinkListener, String) {
    let l = LinkListener::bind("127.0.0.1:0", Secret::new(secret)).unwrap();
    let addr = l.local_addr().to_string();
    (l, addr)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Items of any size (up to frames of many items, and items longer
    /// than a batch) through any window: all of them, in order.
    #[test]
    fn every_item_arrives_in_order(
        items in prop::collection::vec(".{0,300}", 0..400),
        big in prop::option::of(70_000usize..200_000),
        window in 1u64..50,
        flush_every in 1usize..64,
    ) {
        let mut items = items;
        if let Some(n) = big {
            items.insert(items.len() / 2, "x".repeat(n));
        }
        let (l, addr) = listener("s");
        let sent = items.clone();
        let tx = std::thread::spawn(move || {
            let mut link = Link::<String>::connect(&addr, &Secret::new("s")).unwrap();
            for (i, x) in sent.iter().enumerate() {
                link.send(x).unwrap();
                if i % flush_every == 0 {
                    link.flush().unwrap();
                }
            }
            link.finish().unwrap()
        });
        let mut rx = l.accept::<String>(window).unwrap();
        let mut got = Vec::new();
        while rx.recv_batch(|x| got.push(x)).unwrap() {}
        prop_assert!(!rx.recv_batch(|x| got.push(x)).unwrap(), "ended stays ended");
        prop_assert_eq!(tx.join().unwrap(), items.len() as u64);
        prop_assert_eq!(got, items);
    }

    #[test]
    fn raw_items_arrive_in_order(n in 0u64..20_000, window in 1u64..5000) {
        let (l, addr) = listener("s");
        let tx = std::thread::spawn(move || {
            let mut link = RawLink::<[u64; 3]>::connect(&addr, &Secret::new("s")).unwrap();
            for i in 0..n {
                link.send(&[i, i * 2, !i]).unwrap();
            }
            link.finish().unwrap()
        });
        let mut rx = l.accept_raw::<[u64; 3]>(window).unwrap();
        let mut next = 0u64;
        let mut ok = true;
        while rx.recv_batch(|x| {
            ok &= x == [next, next * 2, !next];
            next += 1;
        }).unwrap() {}
        prop_assert_eq!(tx.join().unwrap(), n);
        prop_assert!(ok);
        prop_assert_eq!(next, n);
    }
}

#[test]
fn a_wrong_secret_is_refused() {
    let (l, addr) = listener("right");
    let tx = std::thread::spawn(move || {
        let mut link = Link::<u64>::connect(&addr, &Secret::new("wrong"))?;
        link.send(&1)?;
        link.finish()
    });
    let e = l.accept::<u64>(8).unwrap_err();
    assert!(
        matches!(&e, RemoteError::Refused(m) if m.contains("secret")),
        "{e}"
    );
    // The sender is told why.
    let e = tx.join().unwrap().unwrap_err();
    assert!(
        matches!(&e, RemoteError::Refused(m) if m.contains("wrong secret")),
        "{e}"
    );
}

#[test]
fn another_item_type_is_refused_saying_which() {
    let (l, addr) = listener("s");
    let a = addr.clone();
    let tx = std::thread::spawn(move || {
        let mut link = Link::<u32>::connect(&a, &Secret::new("s"))?;
        link.send(&1)?;
        link.finish()
    });
    let e = l.accept::<u64>(8).unwrap_err().to_string();
    assert!(e.contains("u64") && e.contains("u32"), "{e}");
    let e = tx.join().unwrap().unwrap_err().to_string();
    assert!(e.contains("u64") && e.contains("u32"), "{e}");
    // A raw link and a serde link of the same type do not mix either.
    let tx = std::thread::spawn(move || {
        let mut link = RawLink::<u64>::connect(&addr, &Secret::new("s"))?;
        link.send(&1)?;
        link.finish()
    });
    let e = l.accept::<u64>(8).unwrap_err().to_string();
    assert!(e.contains("raw"), "{e}");
    assert!(tx.join().unwrap().is_err());
}

/// The receiver goes away after a few items: the sender, out of credits or
/// writing into a closed connection, gets an error.
#[test]
fn a_sender_whose_receiver_is_gone_gets_an_error() {
    let (l, addr) = listener("s");
    let tx = std::thread::spawn(move || {
        let mut link = RawLink::<u64>::connect(&addr, &Secret::new("s")).unwrap();
        for i in 0..10_000_000u64 {
            link.send(&i)?;
        }
        link.finish()
    });
    let mut rx = l.accept_raw::<u64>(100).unwrap();
    let mut n = 0;
    while n < 100 && rx.recv_batch(|_| n += 1).unwrap() {}
    drop(rx);
    drop(l);
    let e = tx.join().unwrap().unwrap_err();
    assert!(matches!(e, RemoteError::Io(_)), "{e}");
}

/// A connection that is not a link (garbage after the handshake's
/// challenge) is refused; the listener keeps serving the next.
#[test]
fn a_peer_that_speaks_no_link_is_refused() {
    use std::io::Write;
    let (l, addr) = listener("s");
    let a = addr.clone();
    let junk = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(&a).unwrap();
        let _ = s.write_all(&[0xff; 64]);
    });
    let e = l.accept::<u64>(8).unwrap_err();
    assert!(matches!(e, RemoteError::Refused(_)), "{e}");
    junk.join().unwrap();
    let tx = std::thread::spawn(move || {
        let mut link = Link::<u64>::connect(&addr, &Secret::new("s")).unwrap();
        link.send(&7).unwrap();
        link.finish().unwrap()
    });
    let mut rx = l.accept::<u64>(8).unwrap();
    let mut got = Vec::new();
    while rx.recv_batch(|x| got.push(x)).unwrap() {}
    assert_eq!((tx.join().unwrap(), got), (1, vec![7]));
}
