//! Components built from WIT text for the tests, as a guest toolchain builds them: a core module
//! with the world's exports (bodies `unreachable`: nothing here runs them), its WIT embedded,
//! and wit-component's encoder. wasmtime then gives the types of the exported functions.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use wasm_encoder::{
    CodeSection, ExportKind, ExportSection, Function, FunctionSection, Instruction, MemorySection,
    MemoryType, Module, TypeSection, ValType,
};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Type};
use wasmtime::{Config, Engine};
use wit_component::{ComponentEncoder, StringEncoding};
use wit_parser::abi::WasmType;
use wit_parser::{
    Function as WitFunction, LiftLowerAbi, ManglingAndAbi, PackageId, Resolve, TypeDefKind,
    WasmExport, WasmExportKind, WorldId, WorldItem, WorldKey,
};

/// A function's parameters and result.
pub type Signature = (Vec<(String, Type)>, Option<Type>);

/// A built component: its binary, its exported functions' types (by `name` or
/// `interface-export#name`), and the WIT it was built from.
pub struct Built {
    pub wasm: Vec<u8>,
    pub funcs: BTreeMap<String, Signature>,
    pub resolve: Resolve,
    pub package: PackageId,
}

impl Built {
    /// The parameters of an exported function.
    pub fn params(&self, func: &str) -> Vec<(String, Type)> {
        match self.funcs.get(func) {
            Some((params, _)) => params.clone(),
            None => panic!("no exported function {func}; have {:?}", self.funcs.keys()),
        }
    }

    /// The type of a function's only parameter.
    pub fn param(&self, func: &str) -> Type {
        let params = self.params(func);
        assert_eq!(params.len(), 1, "{func} has one parameter");
        params[0].1.clone()
    }

    /// The result type of an exported function.
    pub fn result(&self, func: &str) -> Type {
        match self.funcs.get(func) {
            Some((_, Some(ty))) => ty.clone(),
            _ => panic!("no exported function {func} with a result"),
        }
    }
}

pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut config = Config::new();
        config.wasm_component_model_fixed_length_lists(true);
        config.wasm_component_model_map(true);
        Engine::new(&config).expect("engine")
    })
}

/// Build the component of the one world in `wit`.
pub fn build(wit: &str) -> Built {
    let mut resolve = Resolve::default();
    let package = resolve
        .push_str("test.wit", wit)
        .expect("the test's WIT parses");
    let world = resolve
        .select_world(&[package], None)
        .expect("the test's WIT has one world");
    let mut module = core_module(&resolve, world);
    wit_component::embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8)
        .expect("embed the WIT");
    let wasm = ComponentEncoder::default()
        .module(&module)
        .expect("the core module fits the world")
        .validate(true)
        .encode()
        .expect("encode the component");
    let component = Component::new(engine(), &wasm).expect("wasmtime compiles the component");
    let mut funcs = BTreeMap::new();
    let ty = component.component_type();
    for (name, item) in ty.exports(engine()) {
        match item.ty {
            ComponentItem::ComponentFunc(f) => {
                funcs.insert(name.to_string(), signature(&f));
            }
            ComponentItem::ComponentInstance(instance) => {
                for (fname, item) in instance.exports(engine()) {
                    if let ComponentItem::ComponentFunc(f) = item.ty {
                        funcs.insert(format!("{name}#{fname}"), signature(&f));
                    }
                }
            }
            _ => {}
        }
    }
    Built {
        wasm,
        funcs,
        resolve,
        package,
    }
}

fn signature(f: &wasmtime::component::types::ComponentFunc) -> Signature {
    let params = f.params().map(|(n, t)| (n.to_string(), t)).collect();
    (params, f.results().next())
}

const MANGLING: ManglingAndAbi = ManglingAndAbi::Legacy(LiftLowerAbi::Sync);

/// A core module exporting what the world's exports need (as wit-component's `dummy_module`
/// does, without a text parser): each function, its post-return, resource destructors, the
/// memory and `cabi_realloc`.
fn core_module(resolve: &Resolve, world: WorldId) -> Vec<u8> {
    let mut m = Core::default();
    for (key, item) in &resolve.worlds[world].exports {
        match item {
            WorldItem::Function(func) => m.func(resolve, None, func),
            WorldItem::Interface { id, .. } => {
                for func in resolve.interfaces[*id].functions.values() {
                    m.func(resolve, Some(key), func);
                }
                for ty in resolve.interfaces[*id].types.values() {
                    if matches!(resolve.types[*ty].kind, TypeDefKind::Resource) {
                        let name = resolve.wasm_export_name(
                            MANGLING,
                            WasmExport::ResourceDtor {
                                interface: key,
                                resource: *ty,
                            },
                        );
                        m.add(name, vec![ValType::I32], vec![]);
                    }
                }
            }
            WorldItem::Type { .. } => {}
        }
    }
    let realloc = resolve.wasm_export_name(MANGLING, WasmExport::Realloc);
    m.add(realloc, vec![ValType::I32; 4], vec![ValType::I32]);
    let memory = resolve.wasm_export_name(MANGLING, WasmExport::Memory);
    m.finish(&memory)
}

#[derive(Default)]
struct Core {
    types: TypeSection,
    functions: FunctionSection,
    exports: ExportSection,
    code: CodeSection,
    count: u32,
}

impl Core {
    fn func(&mut self, resolve: &Resolve, interface: Option<&WorldKey>, func: &WitFunction) {
        let mangling = MANGLING.for_func(func);
        let sig = resolve.wasm_signature(mangling.export_variant(), func);
        let export = |kind| {
            resolve.wasm_export_name(
                mangling,
                WasmExport::Func {
                    interface,
                    func,
                    kind,
                },
            )
        };
        let results = core_types(&sig.results);
        self.add(
            export(WasmExportKind::Normal),
            core_types(&sig.params),
            results.clone(),
        );
        self.add(export(WasmExportKind::PostReturn), results, vec![]);
    }

    fn add(&mut self, name: String, params: Vec<ValType>, results: Vec<ValType>) {
        self.types.ty().function(params, results);
        self.functions.function(self.count);
        self.exports.export(&name, ExportKind::Func, self.count);
        let mut body = Function::new([]);
        body.instruction(&Instruction::Unreachable);
        body.instruction(&Instruction::End);
        self.code.function(&body);
        self.count += 1;
    }

    fn finish(mut self, memory: &str) -> Vec<u8> {
        let mut memories = MemorySection::new();
        memories.memory(MemoryType {
            minimum: 0,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        self.exports.export(memory, ExportKind::Memory, 0);
        let mut module = Module::new();
        module.section(&self.types);
        module.section(&self.functions);
        module.section(&memories);
        module.section(&self.exports);
        module.section(&self.code);
        module.finish()
    }
}

fn core_types(types: &[WasmType]) -> Vec<ValType> {
    types
        .iter()
        .map(|t| match t {
            WasmType::I32 | WasmType::Pointer | WasmType::Length => ValType::I32,
            WasmType::I64 | WasmType::PointerOrI64 => ValType::I64,
            WasmType::F32 => ValType::F32,
            WasmType::F64 => ValType::F64,
        })
        .collect()
}

/// `wasm` with a custom section appended (a component may end with any custom section).
pub fn with_custom_section(mut wasm: Vec<u8>, name: &str, data: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    leb128(&mut payload, name.len());
    payload.extend_from_slice(name.as_bytes());
    payload.extend_from_slice(data);
    wasm.push(0);
    leb128(&mut wasm, payload.len());
    wasm.extend_from_slice(&payload);
    wasm
}

fn leb128(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// The `package-docs` section wit-parser writes for the built component's package.
pub fn package_docs(built: &Built) -> Vec<u8> {
    wit_parser::PackageMetadata::extract(&built.resolve, built.package)
        .encode()
        .expect("encode package docs")
}
