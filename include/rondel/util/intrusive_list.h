// IntrusiveList: the one intrusive doubly linked list of rondel (the worker's client connections,
// a backend's idle connections). An element derives from ListNode<Tag> once per list it can be
// in; linking and unlinking are O(1), allocate nothing and cannot fail. std only.
//
// Not thread-safe: a list and its elements belong to one loop thread.
#pragma once

#include <cstddef>

namespace rondel::util {

struct DefaultListTag {};

// The links of one list an element can be in. Unlinks itself when destroyed.
template <class Tag = DefaultListTag>
class ListNode {
 public:
  ListNode() = default;
  ListNode(const ListNode&) = delete;
  ListNode& operator=(const ListNode&) = delete;
  ~ListNode() { unlink(); }
  bool linked() const noexcept { return prev_ != nullptr; }
  // Takes the node out of whatever list holds it (no-op when in none).
  void unlink() noexcept {
    if (prev_ == nullptr) return;
    prev_->next_ = next_;
    next_->prev_ = prev_;
    prev_ = next_ = nullptr;
  }

 private:
  template <class T, class U>
  friend class IntrusiveList;
  ListNode* prev_ = nullptr;  // circular through the list's sentinel; null = in no list
  ListNode* next_ = nullptr;
};

// A list of T, linked through T's ListNode<Tag> base. The list does not own its elements; an
// element destroyed while linked leaves the list on its own.
template <class T, class Tag = DefaultListTag>
class IntrusiveList {
  using Node = ListNode<Tag>;

 public:
  IntrusiveList() noexcept { head_.prev_ = head_.next_ = &head_; }
  IntrusiveList(const IntrusiveList&) = delete;
  IntrusiveList& operator=(const IntrusiveList&) = delete;
  ~IntrusiveList() {
    while (!empty()) head_.next_->unlink();
  }

  bool empty() const noexcept { return head_.next_ == &head_; }
  // Links t at the front / back (first unlinking it from any list of this tag).
  void push_front(T& t) noexcept { insert_after(&head_, node(t)); }
  void push_back(T& t) noexcept { insert_after(head_.prev_, node(t)); }
  T* front() noexcept { return empty() ? nullptr : elem(head_.next_); }
  T* back() noexcept { return empty() ? nullptr : elem(head_.prev_); }
  // The element after / before t in this list, or null at the end.
  T* next(T& t) noexcept { return node(t)->next_ == &head_ ? nullptr : elem(node(t)->next_); }
  T* prev(T& t) noexcept { return node(t)->prev_ == &head_ ? nullptr : elem(node(t)->prev_); }
  // Calls fn(T&) for each element, front to back; fn may unlink (or destroy) the element it is
  // given, but no other.
  template <class Fn>
  void for_each(Fn&& fn) {
    for (Node* n = head_.next_; n != &head_;) {
      Node* after = n->next_;
      fn(*elem(n));
      n = after;
    }
  }
  size_t size() const noexcept {
    size_t k = 0;
    for (const Node* n = head_.next_; n != &head_; n = n->next_) ++k;
    return k;
  }

 private:
  static Node* node(T& t) noexcept { return static_cast<Node*>(&t); }
  static T* elem(Node* n) noexcept { return static_cast<T*>(n); }
  static void insert_after(Node* at, Node* n) noexcept {
    n->unlink();
    n->prev_ = at;
    n->next_ = at->next_;
    at->next_->prev_ = n;
    at->next_ = n;
  }
  Node head_;
};

}  // namespace rondel::util
