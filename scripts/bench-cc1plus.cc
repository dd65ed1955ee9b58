// The translation unit of scripts/bench-cc1plus.sh: every libstdc++ header,
// then NUM instantiations of containers, algorithms, regex, streams and
// futures over types of their own, so that cc1plus spends seconds in
// deep stacks (about 8 s of CPU at NUM=8 on the project's VM).
#include <bits/stdc++.h>
template <int N> struct Fib { static constexpr long v = Fib<N-1>::v + Fib<N-2>::v; };
template <> struct Fib<0> { static constexpr long v = 0; };
template <> struct Fib<1> { static constexpr long v = 1; };
template <int K> struct T { int a; double b; std::string s; bool operator<(const T& o) const { return a < o.a; } bool operator==(const T& o) const { return a == o.a; } };
template <int K> struct std::hash<T<K>> { size_t operator()(const T<K>& t) const { return t.a; } };
template <int K> long use() {
  std::map<T<K>, std::vector<T<K>>> m; m[T<K>{K}].push_back(T<K>{1});
  std::unordered_map<T<K>, std::set<T<K>>> u; u[T<K>{K}].insert(T<K>{2});
  std::vector<T<K>> v(10); std::sort(v.begin(), v.end()); std::stable_sort(v.begin(), v.end());
  std::deque<std::optional<T<K>>> d; d.emplace_back(T<K>{3});
  std::variant<int, T<K>, std::string> var = T<K>{4};
  std::regex re(std::to_string(K) + "a+b*"); std::smatch sm; std::string s = "aab"; std::regex_match(s, sm, re);
  std::ostringstream os; os << std::fixed << std::setprecision(K % 7) << v[0].b << sm.size();
  auto f = std::async([&]{ return (long)m.size() + (long)u.size() + (long)d.size(); });
  std::priority_queue<T<K>> pq; pq.push(T<K>{5});
  std::list<T<K>> l(v.begin(), v.end()); l.sort();
  return f.get() + os.str().size() + var.index() + pq.size() + l.size() + Fib<40 + K % 40>::v;
}
template <int... K> long all(std::integer_sequence<int, K...>) { return (use<K>() + ...); }
int main() { return (int)all(std::make_integer_sequence<int, NUM>()); }
