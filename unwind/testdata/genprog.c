/* Test program for SFrame compiled from CFI (LoadOptions.SFrameFromCFI):
 * a thread blocked under two functions whose CFI SFrame cannot follow.
 *
 *   genthread -> rbx_cfa -> cfa_expr -> block_here -> pause()
 *
 * cfa_expr's CFA is a DWARF expression (rsp + 16 + 0), which sframegen
 * leaves out: the unwinder must take its CFI. rbx_cfa realigns its stack
 * and keeps its CFA in rbx (as ld.so's _dl_runtime_resolve does): SFrame
 * v3 says so with a flexible FDE, but a caller's CFA based on rbx needs
 * rbx as its callees restored it, which only CFI walks track.
 * main prints "ready" once the thread is about to block, then answers
 * each line on stdin with "pong <line>". x86-64 only.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_barrier_t bar;

__attribute__((noinline, used)) void block_here(void) {
	pthread_barrier_wait(&bar);
	for (;;) pause();
}

void cfa_expr(void);
void rbx_cfa(void);

__asm__(
	".text\n"
	".globl cfa_expr\n"
	".type cfa_expr, @function\n"
	"cfa_expr:\n"
	"	.cfi_startproc\n"
	"	subq $8, %rsp\n"
	/* DW_CFA_def_cfa_expression: DW_OP_breg7 (rsp) 16; DW_OP_lit0; DW_OP_plus */
	"	.cfi_escape 0x0f, 0x04, 0x77, 0x10, 0x30, 0x22\n"
	"	call block_here\n"
	"	addq $8, %rsp\n"
	"	.cfi_def_cfa rsp, 8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size cfa_expr, .-cfa_expr\n"
	".globl rbx_cfa\n"
	".type rbx_cfa, @function\n"
	"rbx_cfa:\n"
	"	.cfi_startproc\n"
	"	pushq %rbx\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset rbx, -16\n"
	"	movq %rsp, %rbx\n"
	"	.cfi_def_cfa_register rbx\n"
	"	andq $-64, %rsp\n"
	"	call cfa_expr\n"
	"	movq %rbx, %rsp\n"
	"	.cfi_def_cfa_register rsp\n"
	"	popq %rbx\n"
	"	.cfi_def_cfa_offset 8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size rbx_cfa, .-rbx_cfa\n");

static void *genthread(void *arg) {
	(void)arg;
	pthread_setname_np(pthread_self(), "gen");
	rbx_cfa();
	return NULL;
}

int main(void) {
	pthread_t t;
	pthread_barrier_init(&bar, NULL, 2);
	pthread_create(&t, NULL, genthread, NULL);
	pthread_barrier_wait(&bar);
	printf("ready\n");
	fflush(stdout);
	char buf[256];
	ssize_t n;
	while ((n = read(0, buf, sizeof buf)) > 0) {
		char reply[300];
		int m = snprintf(reply, sizeof reply, "pong %.*s", (int)n, buf);
		if (write(1, reply, m) != m) return 1;
	}
	return 0;
}
