/* cxxnames.S: one function under two C++ names of equal size, as in
 * libclang-cpp.so.14: clang::Sema::SubstDecl(clang::Decl*,
 * clang::DeclContext*, clang::MultiLevelTemplateArgumentList const&) and
 * clang::TemplateDeclInstantiator::VisitDecl(clang::Decl*) (gas gives the
 * alias the size its target has when .set follows .size). perf 6.1 names
 * the code by the longer demangled name, VisitDecl, whose mangled name is
 * the shorter. */
	.text
	.globl	_ZN5clang4Sema9SubstDeclEPNS_4DeclEPNS_11DeclContextERKNS_30MultiLevelTemplateArgumentListE
	.type	_ZN5clang4Sema9SubstDeclEPNS_4DeclEPNS_11DeclContextERKNS_30MultiLevelTemplateArgumentListE, @function
_ZN5clang4Sema9SubstDeclEPNS_4DeclEPNS_11DeclContextERKNS_30MultiLevelTemplateArgumentListE:
	.cfi_startproc
	movl	$2000, %ecx
	movq	%rdi, %rax
1:	imulq	%rax, %rax
	addq	$1, %rax
	decl	%ecx
	jnz	1b
	ret
	.cfi_endproc
	.size	_ZN5clang4Sema9SubstDeclEPNS_4DeclEPNS_11DeclContextERKNS_30MultiLevelTemplateArgumentListE, .-_ZN5clang4Sema9SubstDeclEPNS_4DeclEPNS_11DeclContextERKNS_30MultiLevelTemplateArgumentListE
	.globl	_ZN5clang24TemplateDeclInstantiator9VisitDeclEPNS_4DeclE
	.type	_ZN5clang24TemplateDeclInstantiator9VisitDeclEPNS_4DeclE, @function
	.set	_ZN5clang24TemplateDeclInstantiator9VisitDeclEPNS_4DeclE, _ZN5clang4Sema9SubstDeclEPNS_4DeclEPNS_11DeclContextERKNS_30MultiLevelTemplateArgumentListE
	.section .note.GNU-stack,"",@progbits
