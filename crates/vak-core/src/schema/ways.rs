//! Which subschemas can be reached twice at one value: those the fast pass must remember.
//!
//! A subschema with one way in is reached at most once per value. One with several (a `$ref`
//! target used in two places) is reached twice at one value only if two of its ways in descend
//! into the value the same way: `allOf: [{$ref: A}, {$ref: A}]`, or two `oneOf` alternatives
//! whose `val` is the same definition. Two definitions of a record's fields (`/a` and `/b`)
//! never meet. The ways in are enumerated from the root as words of steps (a property's name, an
//! item's position, any item, any other name), up to a budget; where the budget does not
//! suffice (a recursive schema has endless ways), every subschema with several ways in is
//! remembered.

use super::*;

/// One step into the value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Name(String),
    /// A name `properties` does not declare (`additionalProperties`).
    OtherName,
    /// The item at a position (`prefixItems`).
    At(usize),
    /// Any item (`items`).
    AnyItem,
}

/// Whether two steps can lead to the same value (read generously: when unsure, they can).
fn meet(a: &Step, b: &Step) -> bool {
    match (a, b) {
        (Step::Name(x), Step::Name(y)) => x == y,
        (Step::At(i), Step::At(j)) => i == j,
        (Step::Name(_) | Step::OtherName, Step::Name(_) | Step::OtherName) => true,
        (Step::At(_) | Step::AnyItem, Step::At(_) | Step::AnyItem) => true,
        _ => false,
    }
}

/// Each subschema `node` leads to, with the step into the value (none: the same value).
fn edges(node: &Node) -> Vec<(NodeId, Option<Step>)> {
    let mut out: Vec<(NodeId, Option<Step>)> = node
        .properties
        .iter()
        .map(|(name, id)| (*id, Some(Step::Name(name.clone()))))
        .collect();
    out.extend(node.additional.map(|id| (id, Some(Step::OtherName))));
    out.extend(node.items.map(|id| (id, Some(Step::AnyItem))));
    out.extend(
        node.prefix
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, Some(Step::At(i)))),
    );
    out.extend(node.reference.map(|id| (id, None)));
    if let Some(c) = node.checks.as_deref() {
        let branches = c.all_of.iter().chain(&c.any_of).chain(&c.one_of);
        out.extend(branches.chain(&c.not).map(|id| (*id, None)));
    }
    out
}

/// Longest word followed (the arguments nest at most 64 deep); past it, the answer is "may".
const MAX_WORD: usize = 64;
/// Most ways in compared for one node; past it, the answer is "may".
const MAX_ARRIVALS: usize = 64;

/// For each node: whether two of its ways in may meet at one value. Steps walked in all: at
/// most a few per node of the schema and a fixed allowance, each word at most [`MAX_WORD`]
/// long; pairs compared, at most [`MAX_ARRIVALS`]² per node.
pub(super) fn may_meet(nodes: &[Node]) -> Vec<bool> {
    let several: Vec<bool> = nodes.iter().map(|n| n.incoming > 1).collect();
    if !several.contains(&true) || nodes.is_empty() {
        return several;
    }
    let mut budget = 16 * nodes.len() + 1024;
    // The words by which each node with several ways in is reached.
    let mut arrivals: Vec<Vec<Vec<Step>>> = vec![Vec::new(); nodes.len()];
    let mut crowded = vec![false; nodes.len()];
    let mut stack: Vec<(NodeId, Vec<Step>)> = vec![(0, Vec::new())];
    while let Some((at, word)) = stack.pop() {
        if budget == 0 || word.len() > MAX_WORD {
            return several;
        }
        budget -= 1;
        if several[at] && !crowded[at] {
            if arrivals[at].len() == MAX_ARRIVALS {
                crowded[at] = true;
            } else {
                arrivals[at].push(word.clone());
            }
        }
        for (to, step) in edges(&nodes[at]) {
            let mut next = word.clone();
            next.extend(step);
            stack.push((to, next));
        }
    }
    arrivals
        .iter()
        .zip(crowded)
        .map(|(words, crowded)| {
            crowded
                || words.iter().enumerate().any(|(i, a)| {
                    words[i + 1..]
                        .iter()
                        .any(|b| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| meet(x, y)))
                })
        })
        .collect()
}
