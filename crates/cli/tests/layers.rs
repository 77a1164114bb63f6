//! The layering rules, checked on the sources: libraries below, applications
//! above.
//!
//! - No library (`sys`, `ring`, `pipeline`, `cluster`, `models`), nor the
//!   workload, service and dashboard crates the binary calls (`apps`,
//!   `serve`, `dashboard`), depends on a command-line, progress-bar,
//!   signal, logging-setup or benchmark crate.
//! - None of them has an import cycle between its modules. A module is a file
//!   or an inline `mod`; module A depends on B when A names an item of B, in
//!   a `use` or in a path (`crate::`, `super::`, `self::`, or a child
//!   module's name). A name re-exported at the crate root counts as its
//!   defining module. Tests (`#[cfg(test)]` modules) are left out: they may
//!   use everything, and nothing uses them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

const LIBRARIES: [&str; 8] = [
    "sys",
    "ring",
    "pipeline",
    "cluster",
    "models",
    "apps",
    "serve",
    "dashboard",
];

const FORBIDDEN: [&str; 7] = [
    "clap",
    "anyhow",
    "indicatif",
    "ctrlc",
    "tracing-subscriber",
    "statepipe-bench",
    "criterion",
];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The dependency names of a manifest's `[dependencies]` sections (also
/// the per-target ones), not the dev- or build-dependencies.
fn normal_dependencies(manifest: &str) -> Vec<String> {
    let mut deps = Vec::new();
    let mut inside = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[dependencies]"
                || (line.starts_with("[target.") && line.ends_with(".dependencies]"));
            continue;
        }
        if inside {
            if let Some((name, _)) = line.split_once('=') {
                let name = name.trim();
                if !name.is_empty() && !name.starts_with('#') {
                    deps.push(name.split('.').next().unwrap_or(name).to_string());
                }
            }
        }
    }
    deps
}

#[test]
fn libraries_depend_on_no_application_crate() {
    for lib in LIBRARIES {
        let path = crates_dir().join(lib).join("Cargo.toml");
        let manifest = std::fs::read_to_string(&path).expect("a manifest");
        let deps = normal_dependencies(&manifest);
        for d in &deps {
            assert!(
                !FORBIDDEN.contains(&d.as_str()),
                "{}: the library depends on {d}, which belongs to an application",
                path.display()
            );
        }
    }
}

/// A module: its path from the crate root, and its items.
struct Module {
    file: PathBuf,
    items: Vec<syn::Item>,
    children: BTreeSet<String>,
}

type ModPath = Vec<String>;

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && {
            let t = a.meta.require_list().map(|l| l.tokens.to_string());
            t.is_ok_and(|t| t == "test" || t.contains("test"))
        }
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Reads the module tree of the crate whose root is `lib`.
fn load(lib: &Path) -> BTreeMap<ModPath, Module> {
    let mut out = BTreeMap::new();
    let text = std::fs::read_to_string(lib).expect("lib.rs");
    let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", lib.display()));
    let dir = lib.parent().expect("a folder").to_path_buf();
    add(&mut out, Vec::new(), lib.to_path_buf(), dir, file.items);
    out
}

/// Adds module `path` (items from `file`; its children's files are under
/// `dir`) and its descendants.
fn add(
    out: &mut BTreeMap<ModPath, Module>,
    path: ModPath,
    file: PathBuf,
    dir: PathBuf,
    items: Vec<syn::Item>,
) {
    let mut children = BTreeSet::new();
    let mut subs = Vec::new();
    for item in &items {
        let syn::Item::Mod(m) = item else { continue };
        if is_cfg_test(&m.attrs) {
            continue;
        }
        let name = m.ident.to_string();
        children.insert(name.clone());
        let mut child = path.clone();
        child.push(name.clone());
        match &m.content {
            Some((_, inner)) => subs.push((child, file.clone(), dir.join(&name), inner.clone())),
            None => {
                let f = match path_attr(&m.attrs) {
                    Some(p) => dir.join(p),
                    None if dir.join(format!("{name}.rs")).exists() => {
                        dir.join(format!("{name}.rs"))
                    }
                    None => dir.join(&name).join("mod.rs"),
                };
                let text =
                    std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                let parsed =
                    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                subs.push((child, f, dir.join(&name), parsed.items));
            }
        }
    }
    out.insert(
        path,
        Module {
            file,
            items,
            children,
        },
    );
    for (child, f, d, items) in subs {
        add(out, child, f, d, items);
    }
}

/// The paths a module names: its `use` trees, flattened, and every path of
/// two or more segments in its code (not in nested modules).
#[derive(Default)]
struct Refs {
    paths: Vec<(Vec<String>, bool)>,
    in_use: bool,
    public_use: bool,
}

impl Refs {
    fn flatten(&mut self, prefix: &mut Vec<String>, t: &syn::UseTree) {
        match t {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.flatten(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut v = prefix.clone();
                v.push(n.ident.to_string());
                self.paths.push((v, self.public_use));
            }
            syn::UseTree::Rename(r) => {
                let mut v = prefix.clone();
                v.push(r.ident.to_string());
                self.paths.push((v, self.public_use));
            }
            syn::UseTree::Glob(_) => {
                let mut v = prefix.clone();
                v.push("*".into());
                self.paths.push((v, self.public_use));
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.flatten(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Refs {
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.in_use = true;
        self.public_use = matches!(u.vis, syn::Visibility::Public(_));
        self.flatten(&mut Vec::new(), &u.tree);
        self.in_use = false;
        self.public_use = false;
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.len() >= 2 && !self.in_use {
            let segs = p.segments.iter().map(|s| s.ident.to_string()).collect();
            self.paths.push((segs, false));
        }
        syn::visit::visit_path(self, p);
    }
}

fn refs_of(m: &Module) -> Vec<(Vec<String>, bool)> {
    let mut r = Refs::default();
    for item in &m.items {
        r.visit_item(item);
    }
    r.paths
}

/// The module `segs` (seen from `from`) points into, if it is in the crate:
/// the deepest module the path walks through, or for a name the root
/// re-exports, its defining module.
fn resolve(
    mods: &BTreeMap<ModPath, Module>,
    reexports: &BTreeMap<String, ModPath>,
    from: &ModPath,
    segs: &[String],
) -> Option<ModPath> {
    let mut at: ModPath;
    let mut rest = segs;
    match segs.first()?.as_str() {
        "crate" => {
            at = Vec::new();
            rest = &segs[1..];
        }
        "self" => {
            at = from.clone();
            rest = &segs[1..];
        }
        "super" => {
            at = from.clone();
            while rest.first().is_some_and(|s| s == "super") {
                at.pop();
                rest = &rest[1..];
            }
        }
        first if mods[from].children.contains(first) => at = from.clone(),
        _ => return None,
    }
    while let Some(s) = rest.first() {
        if mods[&at].children.contains(s) {
            at.push(s.clone());
            rest = &rest[1..];
        } else if at.is_empty() && reexports.contains_key(s) {
            return Some(reexports[s].clone());
        } else {
            break;
        }
    }
    Some(at)
}

fn name(p: &ModPath) -> String {
    if p.is_empty() {
        "crate".into()
    } else {
        format!("crate::{}", p.join("::"))
    }
}

/// Module A → module B → the evidence (file and path) that A names B.
type Edges = BTreeMap<ModPath, BTreeMap<ModPath, String>>;

/// The modules of the crate whose root is `lib`, and its import edges.
fn graph(lib: &Path) -> (BTreeMap<ModPath, Module>, Edges) {
    let mods = load(lib);
    let root: ModPath = Vec::new();
    // Names the root re-exports → their defining module.
    let mut reexports = BTreeMap::new();
    for (segs, public) in refs_of(&mods[&root]) {
        if public {
            if let Some(target) = resolve(&mods, &BTreeMap::new(), &root, &segs) {
                reexports.insert(segs.last().cloned().unwrap_or_default(), target);
            }
        }
    }
    let mut edges: Edges = BTreeMap::new();
    for (path, m) in &mods {
        for (segs, public) in refs_of(m) {
            if path.is_empty() && public {
                continue; // the root's API, not a use
            }
            let Some(to) = resolve(&mods, &reexports, path, &segs) else {
                continue;
            };
            if &to != path {
                edges
                    .entry(path.clone())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| format!("{}: {}", m.file.display(), segs.join("::")));
            }
        }
    }
    (mods, edges)
}

/// The cycles among `lib`'s modules, each as its modules and the edges'
/// evidence.
fn cycles(lib: &Path) -> Vec<String> {
    let (mods, edges) = graph(lib);
    // Modules that reach each other are in one cycle (small graphs: a
    // reachability set per module is enough).
    let reach = |from: &ModPath| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(m) = stack.pop() {
            for next in edges.get(&m).into_iter().flat_map(|e| e.keys()) {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let all: BTreeMap<ModPath, BTreeSet<ModPath>> =
        mods.keys().map(|m| (m.clone(), reach(m))).collect();
    let mut done = BTreeSet::new();
    let mut found = Vec::new();
    for m in mods.keys() {
        if done.contains(m) || !all[m].contains(m) {
            continue;
        }
        let scc: Vec<&ModPath> = all[m].iter().filter(|o| all[*o].contains(m)).collect();
        let mut text = format!(
            "cycle among {}:",
            scc.iter().map(|p| name(p)).collect::<Vec<_>>().join(", ")
        );
        for a in &scc {
            for (b, why) in edges.get(*a).into_iter().flatten() {
                if scc.contains(&b) {
                    text += &format!("\n    {} -> {} ({why})", name(a), name(b));
                }
            }
            done.insert((*a).clone());
        }
        found.push(text);
    }
    found
}

#[test]
fn no_library_has_an_import_cycle_between_its_modules() {
    let mut all = Vec::new();
    for lib in LIBRARIES {
        let root = crates_dir().join(lib).join("src/lib.rs");
        for c in cycles(&root) {
            all.push(format!("statepipe-{lib}: {c}"));
        }
    }
    assert!(all.is_empty(), "\n{}", all.join("\n"));
}

/// Pairs of modules that name each other directly, neither inside the other
/// (a module and its own child are one unit: the parent declares the child,
/// which may use `super::`).
fn mutual_imports(root: &Path) -> Vec<String> {
    let (_, edges) = graph(root);
    let mut found = Vec::new();
    for (a, outs) in &edges {
        for (b, why) in outs {
            if a >= b || b.starts_with(a) || a.starts_with(b) {
                continue;
            }
            if let Some(back) = edges.get(b).and_then(|e| e.get(a)) {
                found.push(format!(
                    "{} and {} import each other:\n    {why}\n    {back}",
                    name(a),
                    name(b)
                ));
            }
        }
    }
    found
}

/// No two files import each other, in any crate of the workspace (the
/// libraries above are held to no cycle at all; the bench library and the
/// binary to this): what both need belongs in a module below both.
#[test]
fn no_two_modules_import_each_other_anywhere() {
    let mut all = Vec::new();
    let mut roots = 0;
    for entry in std::fs::read_dir(crates_dir()).expect("crates/") {
        let dir = entry.expect("an entry").path();
        for root in ["src/lib.rs", "src/main.rs"] {
            let root = dir.join(root);
            if root.exists() {
                roots += 1;
                for pair in mutual_imports(&root) {
                    all.push(format!("{}: {pair}", root.display()));
                }
            }
        }
    }
    assert!(
        roots >= LIBRARIES.len() + 2,
        "found only {roots} crate roots"
    );
    assert!(all.is_empty(), "\n{}", all.join("\n"));
}
