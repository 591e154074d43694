//! The host side of the `vak:tool` WIT package (`wit/`, one file per interface): the generated
//! bindings every capability broker and the dispatcher use, and the package's text as one file
//! for projects built against it outside this repository.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "vak:tool/sandboxed-tool",
    imports: { default: async },
    exports: { default: async },
});

/// The `vak:tool` package as one WIT file (`world.wit` first: it alone names the package), as
/// `vak new` writes it into a Python or JavaScript project's `wit/deps/`.
pub const WIT_PACKAGE: &str = concat!(
    include_str!("../../../wit/world.wit"),
    "\n",
    include_str!("../../../wit/types.wit"),
    "\n",
    include_str!("../../../wit/tool.wit"),
    "\n",
    include_str!("../../../wit/clock.wit"),
    "\n",
    include_str!("../../../wit/http.wit"),
    "\n",
    include_str!("../../../wit/workspace.wit"),
    "\n",
    include_str!("../../../wit/invoke.wit"),
    "\n",
    include_str!("../../../wit/log.wit"),
    "\n",
    include_str!("../../../wit/client.wit"),
);
