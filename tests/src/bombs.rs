//! Compile bombs: valid components, small on disk, that cost the compiler time or memory.

/// A component of `functions` core functions, each `groups` × (two reads, a multiply, a write)
/// over 64 live locals: valid, small on disk, and slow for Cranelift to compile.
pub fn compile_bomb(functions: u32, groups: u32) -> Vec<u8> {
    use wasm_encoder::{
        CodeSection, Function, FunctionSection, Instruction, Module, ModuleSection, TypeSection,
        ValType,
    };
    let mut types = TypeSection::new();
    types.ty().function([ValType::I64], [ValType::I64]);
    let mut funcs = FunctionSection::new();
    let mut code = CodeSection::new();
    for _ in 0..functions {
        funcs.function(0);
        let mut f = Function::new([(64, ValType::I64)]);
        for i in 0..groups {
            f.instruction(&Instruction::LocalGet(1 + i % 64));
            f.instruction(&Instruction::LocalGet(1 + (i * 7) % 64));
            f.instruction(&Instruction::I64Mul);
            f.instruction(&Instruction::LocalSet(1 + (i * 13) % 64));
        }
        f.instruction(&Instruction::LocalGet(1));
        f.instruction(&Instruction::End);
        code.function(&f);
    }
    let mut module = Module::new();
    module.section(&types).section(&funcs).section(&code);
    let mut component = wasm_encoder::Component::new();
    component.section(&ModuleSection(&module));
    component.finish()
}

/// A component of one function that nests `depth` blocks around an add, `bytes` long in all:
/// within the code bounds, and more memory than 128 MiB to compile.
pub fn nesting_bomb(depth: u32, bytes: usize) -> Vec<u8> {
    use wasm_encoder::{
        BlockType, CodeSection, Function, FunctionSection, Instruction, Module, ModuleSection,
        TypeSection, ValType,
    };
    let mut types = TypeSection::new();
    types.ty().function([ValType::I64], [ValType::I64]);
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    let mut f = Function::new([(1, ValType::I64)]);
    for _ in 0..depth {
        f.instruction(&Instruction::Block(BlockType::Empty));
    }
    let work = bytes.saturating_sub(3 * depth as usize) / 7;
    for _ in 0..work {
        f.instruction(&Instruction::LocalGet(1));
        f.instruction(&Instruction::I64Const(1));
        f.instruction(&Instruction::I64Add);
        f.instruction(&Instruction::LocalSet(1));
    }
    for _ in 0..depth {
        f.instruction(&Instruction::End);
    }
    f.instruction(&Instruction::LocalGet(1));
    f.instruction(&Instruction::End);
    let mut code = CodeSection::new();
    code.function(&f);
    let mut module = Module::new();
    module.section(&types).section(&funcs).section(&code);
    let mut component = wasm_encoder::Component::new();
    component.section(&ModuleSection(&module));
    component.finish()
}
