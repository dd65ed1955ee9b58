/* phdrs LIB: dlopen LIB and print, as dl_iterate_phdr reports them, its
   program headers, one a line: type offset vaddr filesz memsz flags align
   in hex. Tests compare them with the headers in LIB's file. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>

static int print(struct dl_phdr_info *info, size_t size, void *data) {
	struct link_map *lm = data;
	(void)size;
	if (info->dlpi_addr != lm->l_addr || info->dlpi_phdr == NULL)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		printf("%x %lx %lx %lx %lx %x %lx\n", (unsigned)p->p_type, (unsigned long)p->p_offset,
		       (unsigned long)p->p_vaddr, (unsigned long)p->p_filesz, (unsigned long)p->p_memsz,
		       (unsigned)p->p_flags, (unsigned long)p->p_align);
	}
	return 1;
}

int main(int argc, char **argv) {
	if (argc != 2)
		return 2;
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	struct link_map *lm;
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !dl_iterate_phdr(print, lm)) {
		fprintf(stderr, "%s: not among the loaded objects\n", argv[1]);
		return 1;
	}
	return 0;
}
