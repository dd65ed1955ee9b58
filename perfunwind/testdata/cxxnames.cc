/* cxxnames: C++ names that perf script shows as libiberty demangles them
 * and as perf 6.1 chooses among aliases, for TestAgainstPerfScript:
 * a member of a class template whose last argument is an empty pack
 * (perf shows ns::Manager<ns::Box<int>>::run, no space between the
 * brackets, as LLVM's PassManager<Module, AnalysisManager<Module>>::run),
 * and, from cxxnames.S, one function under two C++ names. The argument
 * is the number of iterations.
 */
#include <cstdlib>

namespace clang {
struct Decl;
struct DeclContext;
struct MultiLevelTemplateArgumentList;
struct Sema {
	// cxxnames.S: also clang::TemplateDeclInstantiator::VisitDecl.
	static long SubstDecl(Decl *, DeclContext *, const MultiLevelTemplateArgumentList &);
};
} // namespace clang

namespace ns {
template <class T> struct Box {
	T v;
};
template <class T, class... Extra> struct Manager {
	__attribute__((noinline)) long run(long n, Extra...);
};
template <class T, class... Extra> long Manager<T, Extra...>::run(long n, Extra...)
{
	volatile long s = 0;
	for (long i = 0; i < n; i++)
		s = s + i * i;
	auto *d = reinterpret_cast<clang::Decl *>(n);
	long r = clang::Sema::SubstDecl(d, nullptr, *reinterpret_cast<const clang::MultiLevelTemplateArgumentList *>(d));
	return s + r;
}
} // namespace ns

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	ns::Manager<ns::Box<int>> m;
	volatile long sum = 0;
	for (long i = 0; i < n * 80; i++)
		sum = sum + m.run(2000);
	return sum == 42;
}
