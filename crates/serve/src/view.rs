//! The read view: the items as of the last batch `apply` finished, kept in
//! two copies by the `left-right` crate, so the I/O threads answer
//! `GET /item/{id}` and `GET /item` themselves, without the ring.
//!
//! `apply` is the only writer: it appends a [`Change`] for each write it
//! applies and publishes them at the end of its batch, before the ring lets
//! `reply` see that batch. So by the time any answer to a write leaves,
//! the view that every later read enters holds that write (and every write
//! answered before it): a read sent after the answer to a write arrived
//! sees that write, on any connection and any I/O thread, and a read never
//! sees less than a read that finished before it began.
//!
//! Readers never wait: entering the view is two stores to the reader's own
//! epoch counter and a load of the copy's pointer. The writer may wait, at
//! a publish, for readers still in the copy it is about to update, which
//! entered before its previous publish; every read is short (one lookup or
//! one page, serialised) and none blocks.

use std::collections::BTreeMap;
use std::sync::Arc;

use left_right::{Absorb, ReadHandle, ReadHandleFactory, WriteHandle};
use serde::Serialize;

use crate::http::Response;
use crate::store::{self, Item};

/// One copy of the items.
#[derive(Debug, Clone, Default)]
pub struct Items(BTreeMap<u64, Arc<Item>>);

/// A change `apply` made.
#[derive(Debug)]
pub enum Change {
    /// Item created.
    Put(u64, Arc<Item>),
    /// Item deleted.
    Remove(u64),
}

impl Absorb<Change> for Items {
    fn absorb_first(&mut self, change: &mut Change, _: &Self) {
        match change {
            Change::Put(id, item) => {
                self.0.insert(*id, Arc::clone(item));
            }
            Change::Remove(id) => {
                self.0.remove(id);
            }
        }
    }

    fn absorb_second(&mut self, change: Change, _: &Self) {
        match change {
            Change::Put(id, item) => {
                self.0.insert(id, item);
            }
            Change::Remove(id) => {
                self.0.remove(&id);
            }
        }
    }

    fn sync_with(&mut self, first: &Self) {
        self.0.clone_from(&first.0);
    }
}

/// `apply`'s end of the view.
pub struct Publisher(WriteHandle<Items, Change>);

impl Publisher {
    /// A view of `items`, published, and the factory of its readers.
    pub fn new(items: &store::Items) -> (Self, ReaderFactory) {
        let copy = items.iter().map(|(id, i)| (*id, Arc::clone(i))).collect();
        let (mut w, r) = left_right::new_from_empty::<Items, Change>(Items(copy));
        // The first publish swaps two equal copies; the second makes
        // `left-right` sync its copies once (a clone of the items): both
        // before the service answers, so no batch pays for it.
        w.publish();
        w.publish();
        (Publisher(w), ReaderFactory(r.factory()))
    }

    /// Records a change; readers see it after [`Publisher::publish`].
    pub fn change(&mut self, change: Change) {
        self.0.append(change);
    }

    /// Makes every recorded change visible to every read that enters after
    /// this returns (nothing to do if there is none).
    pub fn publish(&mut self) {
        self.0.flush();
    }
}

/// Makes a [`Reader`] for each I/O thread.
#[derive(Clone)]
pub struct ReaderFactory(ReadHandleFactory<Items>);

impl ReaderFactory {
    /// A reader of its own for one thread.
    pub fn reader(&self) -> Reader {
        Reader(self.0.handle())
    }
}

/// One thread's handle on the view.
pub struct Reader(ReadHandle<Items>);

impl Reader {
    /// `GET /item/{id}`: 200 with the item, or 404.
    pub fn get(&self, id: u64) -> Response {
        let Some(items) = self.0.enter() else {
            return stopping();
        };
        match items.0.get(&id) {
            Some(item) => Response::json(200, to_json(&ItemOut::new(id, item))),
            None => Response::error(404, "no such item"),
        }
    }

    /// `GET /item?after=ID&limit=N`: up to `limit` items with ids above
    /// `after`, in id order; `next_after` is set when the page is full.
    pub fn list(&self, after: u64, limit: usize) -> Response {
        let Some(items) = self.0.enter() else {
            return stopping();
        };
        let (mut page, mut bytes, mut cut) = (Vec::new(), 0, false);
        for (id, item) in items.0.range(after.saturating_add(1)..).take(limit) {
            // A page's answer is held whole in memory: it stops at about
            // PAGE_BYTES, however large the items (one at least).
            let size = item.name.len() + 64;
            if !page.is_empty() && bytes + size > PAGE_BYTES {
                cut = true;
                break;
            }
            bytes += size;
            page.push(ItemOut::new(*id, item));
        }
        let next_after = if page.len() == limit || cut {
            page.last().map(|i| i.id)
        } else {
            None
        };
        Response::json(
            200,
            to_json(&Page {
                items: page,
                next_after,
            }),
        )
    }
}

/// About the most bytes of items one page of `GET /item` holds.
const PAGE_BYTES: usize = 1 << 20;

/// The view is gone only once `apply` stopped: the service is stopping.
fn stopping() -> Response {
    let mut r = Response::unavailable("the service is stopping");
    r.close = true;
    r
}

/// An item as `GET` shows it: `{"id":…,"name":…,"price":…}`.
#[derive(Serialize)]
struct ItemOut<'a> {
    id: u64,
    name: &'a str,
    price: f64,
}

impl<'a> ItemOut<'a> {
    fn new(id: u64, item: &'a Item) -> Self {
        ItemOut {
            id,
            name: &item.name,
            price: item.price,
        }
    }
}

/// A page of `GET /item`.
#[derive(Serialize)]
struct Page<'a> {
    items: Vec<ItemOut<'a>>,
    next_after: Option<u64>,
}

fn to_json(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("items serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str) -> Arc<Item> {
        Arc::new(Item {
            name: name.into(),
            price: 1.0,
        })
    }

    #[test]
    fn readers_see_changes_once_published() {
        let mut start = store::Items::new();
        start.insert(1, item("a"));
        let (mut publisher, factory) = Publisher::new(&start);
        let reader = factory.reader();
        assert_eq!(reader.get(1).status, 200);
        publisher.change(Change::Put(2, item("b")));
        publisher.change(Change::Remove(1));
        assert_eq!(reader.get(2).status, 404, "seen before the publish");
        publisher.publish();
        assert_eq!(reader.get(2).status, 200);
        assert_eq!(reader.get(1).status, 404);
        // Both copies stay in step over further publishes.
        publisher.change(Change::Put(3, item("c")));
        publisher.publish();
        publisher.publish();
        let other = factory.reader();
        assert_eq!(
            String::from_utf8(other.list(0, 10).body).unwrap(),
            r#"{"items":[{"id":2,"name":"b","price":1.0},{"id":3,"name":"c","price":1.0}],"next_after":null}"#
        );
        assert_eq!(
            String::from_utf8(other.list(0, 1).body).unwrap(),
            r#"{"items":[{"id":2,"name":"b","price":1.0}],"next_after":2}"#
        );
        drop(publisher);
        assert_eq!(reader.get(2).status, 503);
    }
}
