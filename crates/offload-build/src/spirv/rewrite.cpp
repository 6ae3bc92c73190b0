// offload-spirv: an LLVM pass plugin that turns the linked nvptx64 bitcode of a kernels module
// (built with offload's `spirv` feature) into an OpenCL SPIR-V module for LLVM's SPIR-V backend.
//
// Rust compiles kernels for nvptx64, where every pointer is flat (address space 0). In SPIR-V
// address space 0 is Function (private) storage, so the module cannot just be retargeted: a
// kernel's buffers would become private pointers. The pass rebuilds every global and function
// with the address spaces OpenCL needs:
//   - every flat pointer becomes generic (4), in every type, value and constant;
//   - kernel pointer parameters become CrossWorkgroup (1) and are cast to generic on entry;
//     by-value aggregates become `byval` parameters, as OpenCL passes structs;
//   - `__offload_shared_*` arrays (offload::shared!) are defined in Workgroup (3) memory;
//   - other globals live in CrossWorkgroup (1), the space generic pointers can reach;
//   - allocas stay in Function (0) memory and are cast to generic.
// It also lowers offload-kernel's SPIR-V markers, which only the kernel itself can provide:
//   - `__offload_spirv_dynamic_shared()` / `..._bytes()`: two hidden parameters appended to every
//     kernel, a Workgroup pointer (the launch's dynamic shared memory, an OpenCL local argument)
//     and its size in bytes;
//   - `__offload_spirv_end_thread()`: the thread returns from the kernel (PTX `exit`). Functions
//     that end threads and never return otherwise (the panic path) return instead; every other
//     function that reaches one is inlined, so that the kernel itself can return.
// Kernels that use sub-group builtins require sub-groups of offload's warp size (32). Atomics
// without a scope (Rust's, system scope) get device scope, as CUDA's atomics have.
//
// Errors (inline assembly, NVVM intrinsics, recursion through a marker, external globals) are
// reported as `offload-spirv: ...` and fail the pass.
//
// The plugin's second pass, `offload-spirv-mul-overflow`, runs after LLVM's optimizations and
// lowers multiplies with overflow (checked_mul) to OpenCL's `mul_hi`: see lowerMulWithOverflow.

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Plugins/PassPlugin.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

#include <cstdlib>
#include <map>
#include <vector>

using namespace llvm;

namespace {

constexpr unsigned FunctionSpace = 0;
constexpr unsigned CrossWorkgroup = 1;
constexpr unsigned Workgroup = 3;
constexpr unsigned Generic = 4;

// offload-kernel's WARP_SIZE: warp operations are sub-group operations of this width.
constexpr unsigned WarpSize = 32;

const char *const SpirvTriple = "spirv64v1.4-unknown-unknown";
const char *const SpirvDataLayout =
    "e-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024-n8:16:"
    "32:64-G1";

const char *const DynamicSharedMarker = "__offload_spirv_dynamic_shared";
const char *const DynamicSharedBytesMarker = "__offload_spirv_dynamic_shared_bytes";
const char *const EndThreadMarker = "__offload_spirv_end_thread";
const char *const SharedPrefix = "__offload_shared_";

[[noreturn]] void fail(const Twine &message) {
  errs() << "offload-spirv: " << message << "\n";
  std::exit(1);
}

// Maps every type to the same type with flat pointers made generic.
class GenericPointers : public ValueMapTypeRemapper {
public:
  explicit GenericPointers(LLVMContext &Ctx) : Ctx(Ctx) {}

  Type *remapType(Type *T) override {
    auto Found = Done.find(T);
    if (Found != Done.end())
      return Found->second;
    Type *Mapped = T;
    if (auto *P = dyn_cast<PointerType>(T)) {
      if (P->getAddressSpace() == 0)
        Mapped = PointerType::get(Ctx, Generic);
    } else if (auto *S = dyn_cast<StructType>(T)) {
      if (!S->isOpaque()) {
        SmallVector<Type *, 8> Elements;
        bool Changed = false;
        for (Type *E : S->elements()) {
          Elements.push_back(remapType(E));
          Changed |= Elements.back() != E;
        }
        if (Changed)
          Mapped = S->isLiteral() ? StructType::get(Ctx, Elements, S->isPacked())
                                  : StructType::create(Ctx, Elements, S->getName(), S->isPacked());
      }
    } else if (auto *A = dyn_cast<ArrayType>(T)) {
      Mapped = ArrayType::get(remapType(A->getElementType()), A->getNumElements());
    } else if (auto *V = dyn_cast<VectorType>(T)) {
      Mapped = VectorType::get(remapType(V->getElementType()), V->getElementCount());
    } else if (auto *F = dyn_cast<FunctionType>(T)) {
      SmallVector<Type *, 8> Params;
      for (Type *P : F->params())
        Params.push_back(remapType(P));
      Mapped = FunctionType::get(remapType(F->getReturnType()), Params, F->isVarArg());
    }
    Done[T] = Mapped;
    return Mapped;
  }

private:
  LLVMContext &Ctx;
  DenseMap<Type *, Type *> Done;
};

bool isKernel(const Function &F) { return F.getCallingConv() == CallingConv::PTX_Kernel; }

bool isSubGroupBuiltin(const Function &F) {
  return F.isDeclaration() && F.getName().starts_with("_Z") && F.getName().contains("sub_group");
}

// Functions that call a member of `Seeds`, directly or through other functions, plus `Seeds`.
SetVector<Function *> callersOf(Module &M, ArrayRef<Function *> Seeds) {
  SetVector<Function *> Reached(Seeds.begin(), Seeds.end());
  for (size_t I = 0; I < Reached.size(); ++I) {
    for (User *U : Reached[I]->users()) {
      auto *Call = dyn_cast<CallBase>(U);
      if (!Call || Call->getCalledOperand() != Reached[I])
        fail("the address of " + Reached[I]->getName() +
             " is taken; SPIR-V kernels cannot call through pointers");
      Reached.insert(Call->getFunction());
    }
  }
  return Reached;
}

class Rewrite {
public:
  explicit Rewrite(Module &M) : M(M), Ctx(M.getContext()), Types(Ctx) {}

  void run() {
    if (!Triple(M.getTargetTriple()).isNVPTX())
      fail("expected nvptx64 bitcode, got target " + M.getTargetTriple().str());
    rejectPtxOnlyCode();
    expandMinMaxNum();
    lowerEndThread();
    inlineCallersOf({DynamicSharedMarker, DynamicSharedBytesMarker});
    for (Function &F : M)
      if (isKernel(F))
        Kernels.push_back(&F);
    if (Kernels.empty())
      fail("the module has no kernels");
    SetVector<Function *> UsesSubGroups = subGroupUsers();
    rebuildGlobals();
    declareFunctions();
    for (Function *Old : OldFunctions)
      if (!Old->isDeclaration())
        cloneBody(Old);
    for (Function *Old : Kernels)
      if (UsesSubGroups.contains(Old))
        cast<Function>(VMap[Old])->setMetadata(
            "intel_reqd_sub_group_size",
            MDNode::get(Ctx, ConstantAsMetadata::get(
                                 ConstantInt::get(Type::getInt32Ty(Ctx), WarpSize))));
    replaceOld();
    M.setTargetTriple(Triple(SpirvTriple));
    M.setDataLayout(SpirvDataLayout);
    std::string Errors;
    raw_string_ostream Out(Errors);
    if (verifyModule(M, &Out))
      fail("the rewritten module is invalid:\n" + Errors);
  }

private:
  Module &M;
  LLVMContext &Ctx;
  GenericPointers Types;
  ValueToValueMapTy VMap;
  std::vector<Function *> Kernels;
  std::vector<Function *> OldFunctions;
  std::vector<GlobalVariable *> OldGlobals;
  // New kernel -> its hidden (dynamic shared memory, its bytes) parameters.
  std::map<Function *, std::pair<Argument *, Argument *>> Hidden;
  // The rebuilt declarations of the markers (null where unused).
  Function *DynamicShared = nullptr, *DynamicSharedBytes = nullptr, *EndThread = nullptr;

  void rejectPtxOnlyCode() {
    for (Function &F : M) {
      if (F.getName().starts_with("llvm.nvvm."))
        for (User *U : F.users())
          if (auto *I = dyn_cast<Instruction>(U))
            fail(I->getFunction()->getName() + " uses the NVPTX intrinsic " + F.getName() +
                 ", which has no SPIR-V form (use offload's device API)");
      for (Instruction &I : instructions(F))
        if (auto *Call = dyn_cast<CallBase>(&I)) {
          if (auto *Asm = dyn_cast<InlineAsm>(Call->getCalledOperand()))
            fail(F.getName() + " holds PTX inline assembly `" + Asm->getAsmString() +
                 "`, which SPIR-V cannot hold (is offload's `spirv` feature on?)");
          if (!Call->getCalledFunction())
            fail(F.getName() + " calls through a function pointer, which SPIR-V kernels cannot");
        }
    }
  }

  // LLVM 22's SPIR-V backend cannot select `llvm.maximumnum`/`llvm.minimumnum` (Rust's
  // `f32::max`/`min`): compares and selects with the same result (IEEE maximumNumber: a NaN
  // operand is ignored, +0 is above -0).
  void expandMinMaxNum() {
    std::vector<IntrinsicInst *> Calls;
    for (Function &F : M)
      for (Instruction &I : instructions(F))
        if (auto *Call = dyn_cast<IntrinsicInst>(&I))
          if (Call->getIntrinsicID() == Intrinsic::maximumnum ||
              Call->getIntrinsicID() == Intrinsic::minimumnum)
            Calls.push_back(Call);
    for (IntrinsicInst *Call : Calls) {
      bool Max = Call->getIntrinsicID() == Intrinsic::maximumnum;
      IRBuilder<> B(Call);
      Value *A = Call->getArgOperand(0), *Bv = Call->getArgOperand(1);
      Type *Bits = B.getIntNTy(A->getType()->getScalarSizeInBits());
      if (A->getType()->isVectorTy())
        fail("vector " + Call->getCalledFunction()->getName() + " has no SPIR-V lowering here");
      Value *ANegative = B.CreateICmpSLT(B.CreateBitCast(A, Bits), ConstantInt::get(Bits, 0));
      Value *Equal = Max ? B.CreateSelect(ANegative, Bv, A) : B.CreateSelect(ANegative, A, Bv);
      Value *AWins = Max ? B.CreateFCmpOGT(A, Bv) : B.CreateFCmpOLT(A, Bv);
      Value *R = B.CreateSelect(AWins, A, B.CreateSelect(B.CreateFCmpOEQ(A, Bv), Equal, Bv));
      R = B.CreateSelect(B.CreateFCmpUNO(Bv, Bv), A, R);
      R = B.CreateSelect(B.CreateFCmpUNO(A, A), Bv, R);
      Call->replaceAllUsesWith(R);
      Call->eraseFromParent();
    }
  }

  // Makes the thread that calls the end-thread marker return from its kernel.
  void lowerEndThread() {
    Function *End = M.getFunction(EndThreadMarker);
    if (!End)
      return;
    // Functions that never return but through the marker (the panic handler and the panic
    // functions of core calling it) return instead; the rest get inlined into the kernels.
    SetVector<Function *> Enders;
    Enders.insert(End);
    for (bool Grew = true; Grew;) {
      Grew = false;
      for (Function &F : M)
        if (!F.isDeclaration() && F.doesNotReturn() && !Enders.contains(&F) && !isKernel(F) &&
            callsAny(F, Enders)) {
          Enders.insert(&F);
          Grew = true;
        }
    }
    std::vector<Function *> Returning(Enders.begin() + 1, Enders.end());
    for (Function *F : Returning)
      F->removeFnAttr(Attribute::NoReturn);
    for (Function *F : Returning)
      returnAfterEnders(*F, Enders);
    std::vector<Function *> EnderList(Enders.begin(), Enders.end());
    inlineCallersOf(EnderList, &Enders);
    for (Function &F : M)
      if (isKernel(F))
        returnAfterEnders(F, Enders);
  }

  static bool callsAny(Function &F, const SetVector<Function *> &Targets) {
    for (Instruction &I : instructions(F))
      if (auto *Call = dyn_cast<CallBase>(&I))
        if (Targets.contains(Call->getCalledFunction()))
          return true;
    return false;
  }

  // Ends the block after every call of an `Enders` member with a return, dropping what followed.
  static void returnAfterEnders(Function &F, const SetVector<Function *> &Enders) {
    std::vector<CallBase *> Calls;
    for (Instruction &I : instructions(F))
      if (auto *Call = dyn_cast<CallBase>(&I))
        if (Enders.contains(Call->getCalledFunction()))
          Calls.push_back(Call);
    for (CallBase *Call : Calls) {
      Call->removeFnAttr(Attribute::NoReturn);
      BasicBlock *Block = Call->getParent();
      BasicBlock *Rest = Block->splitBasicBlock(Call->getNextNode());
      Block->getTerminator()->eraseFromParent();
      Type *Ret = F.getReturnType();
      ReturnInst::Create(F.getContext(), Ret->isVoidTy() ? nullptr : PoisonValue::get(Ret),
                         Block);
      if (pred_empty(Rest))
        DeleteDeadBlock(Rest);
    }
  }

  void inlineCallersOf(ArrayRef<const char *> Names) {
    std::vector<Function *> Seeds;
    for (const char *Name : Names)
      if (Function *F = M.getFunction(Name))
        Seeds.push_back(F);
    inlineCallersOf(Seeds);
  }

  // Inlines every non-kernel function that reaches `Seeds` (other than `Keep`) into its
  // callers, until only kernels call them.
  void inlineCallersOf(ArrayRef<Function *> Seeds, const SetVector<Function *> *Keep = nullptr) {
    if (Seeds.empty())
      return;
    SetVector<Function *> Reaching = callersOf(M, Seeds);
    for (Function *F : Reaching) {
      if (isKernel(*F) || F->isDeclaration() || (Keep && Keep->contains(F)))
        continue;
      for (int Round = 0; !F->use_empty(); ++Round) {
        if (Round > 64)
          fail(F->getName() + " is recursive and reaches " + Seeds[0]->getName() +
               "; SPIR-V kernels cannot recurse there");
        std::vector<CallBase *> Calls;
        for (User *U : F->users())
          Calls.push_back(cast<CallBase>(U));
        for (CallBase *Call : Calls) {
          InlineFunctionInfo Info;
          InlineResult Result = InlineFunction(*Call, Info);
          if (!Result.isSuccess())
            fail("cannot inline " + F->getName() + " into " + Call->getFunction()->getName() +
                 ": " + Result.getFailureReason());
        }
      }
    }
  }

  SetVector<Function *> subGroupUsers() {
    std::vector<Function *> Builtins;
    for (Function &F : M)
      if (isSubGroupBuiltin(F))
        Builtins.push_back(&F);
    return callersOf(M, Builtins);
  }

  void rebuildGlobals() {
    for (GlobalVariable &G : M.globals())
      OldGlobals.push_back(&G);
    for (GlobalVariable *Old : OldGlobals) {
      bool Shared = Old->getName().starts_with(SharedPrefix);
      if (Old->isDeclaration() && !Shared)
        fail("the kernels use the external global " + Old->getName() +
             ", which no SPIR-V module defines");
      Type *ValueType = Types.remapType(Old->getValueType());
      auto *New = new GlobalVariable(
          M, ValueType, Old->isConstant() && !Shared,
          Shared ? GlobalValue::InternalLinkage : Old->getLinkage(),
          Shared ? UndefValue::get(ValueType) : nullptr, Old->getName() + ".spirv", nullptr,
          GlobalValue::NotThreadLocal, Shared ? Workgroup : CrossWorkgroup);
      New->setAlignment(Shared ? MaybeAlign(16) : Old->getAlign());
      New->setUnnamedAddr(Old->getUnnamedAddr());
      VMap[Old] = ConstantExpr::getAddrSpaceCast(New, PointerType::get(Ctx, Generic));
    }
    for (GlobalVariable *Old : OldGlobals)
      if (Old->hasInitializer()) {
        auto *New = cast<GlobalVariable>(
            cast<ConstantExpr>(static_cast<Value *>(VMap[Old]))->getOperand(0));
        New->setInitializer(MapValue(Old->getInitializer(), VMap, RF_None, &Types));
      }
  }

  void declareFunctions() {
    for (Function &F : M)
      OldFunctions.push_back(&F);
    for (Function *Old : OldFunctions) {
      if (Old->isIntrinsic()) {
        declareIntrinsic(Old);
        continue;
      }
      Function *New = isKernel(*Old) ? declareKernel(Old) : declareFunction(Old);
      VMap[Old] = New;
      StringRef Name = Old->getName();
      if (Name == DynamicSharedMarker)
        DynamicShared = New;
      else if (Name == DynamicSharedBytesMarker)
        DynamicSharedBytes = New;
      else if (Name == EndThreadMarker)
        EndThread = New;
    }
  }

  void declareIntrinsic(Function *Old) {
    auto *Signature = cast<FunctionType>(Types.remapType(Old->getFunctionType()));
    if (Signature == Old->getFunctionType()) {
      VMap[Old] = Old;
      return;
    }
    SmallVector<Type *, 4> Overloads;
    if (!Intrinsic::getIntrinsicSignature(Old->getIntrinsicID(), Signature, Overloads))
      fail("no generic-pointer form of the intrinsic " + Old->getName());
    VMap[Old] = Intrinsic::getOrInsertDeclaration(&M, Old->getIntrinsicID(), Overloads);
  }

  Function *declareFunction(Function *Old) {
    auto *Signature = cast<FunctionType>(Types.remapType(Old->getFunctionType()));
    Function *New = Function::Create(Signature, Old->getLinkage(), Old->getAddressSpace(),
                                     Old->getName() + ".spirv", &M);
    New->copyAttributesFrom(Old);
    stripTargetAttributes(New);
    New->setCallingConv(CallingConv::SPIR_FUNC);
    return New;
  }

  static void stripTargetAttributes(Function *F) {
    F->removeFnAttr("target-cpu");
    F->removeFnAttr("target-features");
  }

  // A kernel's SPIR-V signature: buffers in CrossWorkgroup memory, aggregates `byval`, then the
  // hidden dynamic shared memory parameters.
  Function *declareKernel(Function *Old) {
    const DataLayout &Layout = M.getDataLayout();
    SmallVector<Type *, 16> Params;
    for (Argument &A : Old->args()) {
      Type *T = A.getType();
      if (T->isPointerTy())
        Params.push_back(PointerType::get(Ctx, CrossWorkgroup));
      else if (T->isAggregateType())
        Params.push_back(PointerType::get(Ctx, FunctionSpace));
      else
        Params.push_back(Types.remapType(T));
    }
    Params.push_back(PointerType::get(Ctx, Workgroup));
    Params.push_back(Type::getInt64Ty(Ctx));
    auto *Signature = FunctionType::get(Old->getReturnType(), Params, false);
    Function *New = Function::Create(Signature, Old->getLinkage(), Old->getAddressSpace(),
                                     Old->getName() + ".spirv", &M);
    New->setAttributes(AttributeList::get(Ctx, Old->getAttributes().getFnAttrs(),
                                          Old->getAttributes().getRetAttrs(), {}));
    stripTargetAttributes(New);
    New->setCallingConv(CallingConv::SPIR_KERNEL);

    IRBuilder<> Entry(BasicBlock::Create(Ctx, "offload.params", New));
    for (Argument &A : Old->args()) {
      Argument *Param = New->getArg(A.getArgNo());
      Param->setName(A.getName());
      AttrBuilder OldAttributes(Ctx, Old->getAttributes().getParamAttrs(A.getArgNo()));
      Type *T = A.getType();
      if (T->isPointerTy()) {
        Param->addAttrs(OldAttributes);
        VMap[&A] = Entry.CreateAddrSpaceCast(Param, PointerType::get(Ctx, Generic));
      } else if (T->isAggregateType()) {
        // OpenCL passes structs by value; an array (Rust's ABI gives small structs as arrays of
        // integers) goes as a struct holding it, the same bytes.
        Type *Aggregate = Types.remapType(T);
        Type *Passed = Aggregate->isStructTy() ? Aggregate : StructType::get(Ctx, ArrayRef<Type *>(Aggregate));
        Align Alignment = Layout.getABITypeAlign(Passed);
        Param->addAttr(Attribute::getWithByValType(Ctx, Passed));
        Param->addAttr(Attribute::getWithAlignment(Ctx, Alignment));
        Value *Loaded = Entry.CreateAlignedLoad(Passed, Param, Alignment);
        VMap[&A] = Passed == Aggregate ? Loaded : Entry.CreateExtractValue(Loaded, 0);
      } else {
        Param->addAttrs(OldAttributes);
        VMap[&A] = Param;
      }
    }
    Argument *Shared = New->getArg(Old->arg_size());
    Argument *SharedBytes = New->getArg(Old->arg_size() + 1);
    Shared->setName("offload.dynamic_shared");
    Shared->addAttr(Attribute::NoAlias);
    Shared->addAttr(Attribute::getWithAlignment(Ctx, Align(16)));
    SharedBytes->setName("offload.dynamic_shared_bytes");
    Hidden[New] = {Shared, SharedBytes};
    return New;
  }

  void cloneBody(Function *Old) {
    auto *New = cast<Function>(VMap[Old]);
    for (Argument &A : Old->args())
      if (!VMap.count(&A))
        VMap[&A] = New->getArg(A.getArgNo());
    BasicBlock *Params = New->empty() ? nullptr : &New->getEntryBlock();
    auto Attributes = New->getAttributes();
    auto CallingConv = New->getCallingConv();
    SmallVector<ReturnInst *, 4> Returns;
    CloneFunctionInto(New, Old, VMap, CloneFunctionChangeType::GlobalChanges, Returns, "", nullptr,
                      &Types);
    New->setAttributes(Attributes);
    New->setCallingConv(CallingConv);
    stripTargetAttributes(New);
    if (Params) {
      // The parameter casts open the cloned entry block.
      BasicBlock *Entry = Params->getNextNode();
      while (!Params->empty())
        Params->back().moveBefore(Entry->getFirstInsertionPt());
      Params->eraseFromParent();
    }
    fixBody(*New);
  }

  void fixBody(Function &F) {
    std::vector<Instruction *> Dead;
    SyncScope::ID Device = Ctx.getOrInsertSyncScopeID("device");
    auto Hiddens = Hidden.find(&F);
    for (Instruction &I : instructions(F)) {
      if (auto *Alloca = dyn_cast<AllocaInst>(&I)) {
        if (Alloca->getAddressSpace() != FunctionSpace) {
          IRBuilder<> B(Alloca);
          AllocaInst *Private = B.CreateAlloca(Alloca->getAllocatedType(), FunctionSpace,
                                               Alloca->getArraySize());
          Private->setAlignment(Alloca->getAlign());
          Private->takeName(Alloca);
          Alloca->replaceAllUsesWith(
              B.CreateAddrSpaceCast(Private, PointerType::get(Ctx, Generic)));
          Dead.push_back(Alloca);
        }
      } else if (auto *Intrinsic = dyn_cast<IntrinsicInst>(&I)) {
        // Lifetime markers must name an alloca, not its generic cast: drop them.
        if (Intrinsic->isLifetimeStartOrEnd())
          Dead.push_back(Intrinsic);
      } else if (auto *Call = dyn_cast<CallBase>(&I)) {
        Function *Callee = Call->getCalledFunction();
        if (Callee == DynamicShared || Callee == DynamicSharedBytes) {
          if (Hiddens == Hidden.end())
            fail("dynamic shared memory is used outside a kernel, in " + F.getName());
          bool Bytes = Callee == DynamicSharedBytes;
          IRBuilder<> B(Call);
          Value *V = Bytes ? static_cast<Value *>(Hiddens->second.second)
                           : B.CreateAddrSpaceCast(Hiddens->second.first,
                                                   PointerType::get(Ctx, Generic));
          Call->replaceAllUsesWith(V);
          Dead.push_back(Call);
        } else if (Callee == EndThread) {
          Dead.push_back(Call);
        } else {
          Call->setCallingConv(Callee->getCallingConv());
        }
      }
      if (auto *RMW = dyn_cast<AtomicRMWInst>(&I); RMW && RMW->getSyncScopeID() == SyncScope::System)
        RMW->setSyncScopeID(Device);
      if (auto *CAS = dyn_cast<AtomicCmpXchgInst>(&I);
          CAS && CAS->getSyncScopeID() == SyncScope::System)
        CAS->setSyncScopeID(Device);
      if (auto *Load = dyn_cast<LoadInst>(&I);
          Load && Load->isAtomic() && Load->getSyncScopeID() == SyncScope::System)
        Load->setSyncScopeID(Device);
      if (auto *Store = dyn_cast<StoreInst>(&I);
          Store && Store->isAtomic() && Store->getSyncScopeID() == SyncScope::System)
        Store->setSyncScopeID(Device);
    }
    for (Instruction *I : Dead)
      I->eraseFromParent();
  }

  void replaceOld() {
    std::vector<Function *> Replaced;
    for (Function *Old : OldFunctions)
      if (VMap[Old] != Old)
        Replaced.push_back(Old);
    for (Function *Old : Replaced)
      Old->dropAllReferences();
    for (GlobalVariable *Old : OldGlobals)
      Old->dropAllReferences();
    std::vector<std::pair<GlobalValue *, std::string>> Renames;
    for (Function *Old : Replaced) {
      auto *New = cast<Function>(VMap[Old]);
      std::string Name = Old->getName().str();
      VMap.erase(Old);
      Old->replaceAllUsesWith(PoisonValue::get(Old->getType()));
      Old->eraseFromParent();
      if (!New->isIntrinsic())
        Renames.push_back({New, Name});
    }
    for (GlobalVariable *Old : OldGlobals) {
      auto *New = cast<GlobalVariable>(
          cast<ConstantExpr>(static_cast<Value *>(VMap[Old]))->getOperand(0));
      std::string Name = Old->getName().str();
      VMap.erase(Old);
      Old->replaceAllUsesWith(PoisonValue::get(Old->getType()));
      Old->eraseFromParent();
      Renames.push_back({New, Name});
    }
    for (auto &[Renamed, Name] : Renames)
      Renamed->setName(Name);
    // The markers are lowered: nothing calls them any more.
    for (Function *Marker : {DynamicShared, DynamicSharedBytes, EndThread})
      if (Marker)
        Marker->eraseFromParent();
  }
};

// Intel's OpenCL runtimes lack OpUMulExtended and OpSMulExtended, which LLVM's SPIR-V backend
// makes of `llvm.umul/smul.with.overflow` (Rust's checked_mul and overflowing_mul). They become
// the wrapping product, and OpenCL's `mul_hi` (OpenCL.std u_mul_hi / s_mul_hi) for the overflow:
// the high half is not zero (unsigned) or not the low half's sign (signed). A pass of its own,
// run after LLVM's optimizations, which form these intrinsics too (InstCombine, from a widened
// or divided product).
void lowerMulWithOverflow(Module &M) {
  std::vector<IntrinsicInst *> Calls;
  for (Function &F : M)
    for (Instruction &I : instructions(F))
      if (auto *Call = dyn_cast<IntrinsicInst>(&I))
        if (Call->getIntrinsicID() == Intrinsic::umul_with_overflow ||
            Call->getIntrinsicID() == Intrinsic::smul_with_overflow)
          Calls.push_back(Call);
  for (IntrinsicInst *Call : Calls) {
    bool Signed = Call->getIntrinsicID() == Intrinsic::smul_with_overflow;
    auto *T = dyn_cast<IntegerType>(Call->getArgOperand(0)->getType());
    // OpenCL's mangled scalar types of mul_hi's overloads: char, short, int, long and unsigned.
    char Mangled = 0;
    switch (T ? T->getBitWidth() : 0) {
    case 8: Mangled = Signed ? 'c' : 'h'; break;
    case 16: Mangled = Signed ? 's' : 't'; break;
    case 32: Mangled = Signed ? 'i' : 'j'; break;
    case 64: Mangled = Signed ? 'l' : 'm'; break;
    }
    if (!Mangled)
      fail(Call->getFunction()->getName() + " uses " + Call->getCalledFunction()->getName() +
           ", which has no SPIR-V lowering here (OpenCL's mul_hi takes 8- to 64-bit scalars)");
    std::string Name = std::string("_Z6mul_hi") + Mangled + Mangled;
    FunctionCallee MulHi = M.getOrInsertFunction(Name, T, T, T);
    auto *Declared = cast<Function>(MulHi.getCallee());
    Declared->setCallingConv(CallingConv::SPIR_FUNC);
    Declared->setDoesNotAccessMemory();
    Declared->setDoesNotThrow();
    Declared->setWillReturn();

    IRBuilder<> B(Call);
    Value *X = Call->getArgOperand(0), *Y = Call->getArgOperand(1);
    Value *Low = B.CreateMul(X, Y);
    CallInst *High = B.CreateCall(MulHi, {X, Y});
    High->setCallingConv(CallingConv::SPIR_FUNC);
    Value *Expected = Signed ? B.CreateAShr(Low, T->getBitWidth() - 1)
                             : static_cast<Value *>(ConstantInt::get(T, 0));
    Value *Result = B.CreateInsertValue(PoisonValue::get(Call->getType()), Low, 0);
    Result = B.CreateInsertValue(Result, B.CreateICmpNE(High, Expected), 1);
    Call->replaceAllUsesWith(Result);
    Call->eraseFromParent();
  }
}

// LLVM 22's SPIR-V backend cannot select `freeze` (G_FREEZE), which the O3 pipeline forms (a
// select on a comparison of loaded values, say, in a minimum with its index). SPIR-V has no
// poison to stop: each freeze becomes its operand. Run after LLVM's optimizations, with the
// mul-overflow lowering.
void removeFreezes(Module &M) {
  std::vector<FreezeInst *> Freezes;
  for (Function &F : M)
    for (Instruction &I : instructions(F))
      if (auto *Freeze = dyn_cast<FreezeInst>(&I))
        Freezes.push_back(Freeze);
  for (FreezeInst *Freeze : Freezes) {
    Freeze->replaceAllUsesWith(Freeze->getOperand(0));
    Freeze->eraseFromParent();
  }
}

struct OffloadSpirv : PassInfoMixin<OffloadSpirv> {
  PreservedAnalyses run(Module &M, ModuleAnalysisManager &) {
    Rewrite(M).run();
    return PreservedAnalyses::none();
  }
  static bool isRequired() { return true; }
};

struct OffloadSpirvMulOverflow : PassInfoMixin<OffloadSpirvMulOverflow> {
  PreservedAnalyses run(Module &M, ModuleAnalysisManager &) {
    lowerMulWithOverflow(M);
    removeFreezes(M);
    return PreservedAnalyses::none();
  }
  static bool isRequired() { return true; }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "offload-spirv", "1", [](PassBuilder &PB) {
            PB.registerPipelineParsingCallback(
                [](StringRef Name, ModulePassManager &MPM,
                   ArrayRef<PassBuilder::PipelineElement>) {
                  if (Name == "offload-spirv")
                    MPM.addPass(OffloadSpirv());
                  else if (Name == "offload-spirv-mul-overflow")
                    MPM.addPass(OffloadSpirvMulOverflow());
                  else
                    return false;
                  return true;
                });
          }};
}
