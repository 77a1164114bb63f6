//! Graphviz `dot` text for the logical graph of a pipeline.

use std::fmt::Write as _;

/// A node id in the drawing.
pub(crate) type NodeId = usize;

/// The kind of a node, which decides how it is drawn.
#[derive(Clone, Copy)]
pub(crate) enum Shape {
    /// A stage that runs a state machine.
    Stage,
    /// A stage that may send items to the error output.
    FallibleStage,
    /// Where items are routed or copied to branches.
    Split,
    /// Where branch outputs meet again.
    Join,
    /// The pipeline's input or output.
    Port,
}

/// Accumulates nodes, clusters and edges; [`Dot::finish`] writes the text.
pub(crate) struct Dot {
    body: String,
    edges: Vec<(NodeId, NodeId)>,
    fallible: Vec<NodeId>,
    next: NodeId,
    depth: usize,
    clusters: usize,
}

impl Dot {
    pub(crate) fn new() -> Self {
        Dot {
            body: String::new(),
            edges: Vec::new(),
            fallible: Vec::new(),
            next: 0,
            depth: 1,
            clusters: 0,
        }
    }

    /// Adds a node labelled `label`; returns its id.
    pub(crate) fn node(&mut self, label: &str, shape: Shape) -> NodeId {
        let id = self.next;
        self.next += 1;
        let attrs = match shape {
            Shape::Stage => "shape=box",
            Shape::FallibleStage => "shape=box, peripheries=2",
            Shape::Split => "shape=triangle, orientation=270",
            Shape::Join => "shape=invtriangle, orientation=270",
            Shape::Port => "shape=circle",
        };
        if matches!(shape, Shape::FallibleStage) {
            self.fallible.push(id);
        }
        self.line(&format!("n{id} [label=\"{}\", {attrs}];", escape(label)));
        id
    }

    /// Marks `id` as a node that may send items to the error output.
    pub(crate) fn may_fail(&mut self, id: NodeId) {
        self.fallible.push(id);
    }

    /// Adds an edge from each of `from` to `to`.
    pub(crate) fn edges(&mut self, from: &[NodeId], to: NodeId) {
        self.edges.extend(from.iter().map(|&f| (f, to)));
    }

    /// Opens a cluster (a labelled box around the nodes added until
    /// [`Dot::end_cluster`]).
    pub(crate) fn begin_cluster(&mut self, label: &str) {
        let k = self.clusters;
        self.clusters += 1;
        self.line(&format!("subgraph cluster_{k} {{"));
        self.depth += 1;
        self.line(&format!("label=\"{}\";", escape(label)));
    }

    pub(crate) fn end_cluster(&mut self) {
        assert!(self.depth > 1, "end_cluster without begin_cluster");
        self.depth -= 1;
        self.line("}");
    }

    /// The whole graph; failing stages get a dashed edge to an `errors` node.
    pub(crate) fn finish(mut self) -> String {
        assert_eq!(self.depth, 1, "a cluster was left open");
        let errors = (!self.fallible.is_empty()).then(|| self.node("errors", Shape::Port));
        let mut out = String::from("digraph pipeline {\n    rankdir=LR;\n");
        out.push_str(&self.body);
        for (a, b) in &self.edges {
            let _ = writeln!(out, "    n{a} -> n{b};");
        }
        if let Some(e) = errors {
            for f in &self.fallible {
                let _ = writeln!(out, "    n{f} -> n{e} [style=dashed];");
            }
        }
        out.push_str("}\n");
        out
    }

    fn line(&mut self, text: &str) {
        for _ in 0..self.depth {
            self.body.push_str("    ");
        }
        self.body.push_str(text);
        self.body.push('\n');
    }
}

/// Escapes a label for a double-quoted dot string.
fn escape(label: &str) -> String {
    let mut out = String::with_capacity(label.len());
    for c in label.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped() {
        let mut d = Dot::new();
        let a = d.node("say \"hi\"\\", Shape::Stage);
        let b = d.node("b", Shape::FallibleStage);
        d.edges(&[a], b);
        let text = d.finish();
        assert!(text.contains(r#"label="say \"hi\"\\""#), "{text}");
        assert!(text.contains("n0 -> n1;"));
        assert!(text.contains("n1 -> n2 [style=dashed];"), "{text}");
    }
}
