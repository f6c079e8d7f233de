"""The operator's console: the admin's pages and actions, the dashboard and its history, the
queues' overview, the health probe and the staff notice. It reads and acts through the
storage layer and the task API, and nothing below it imports it.
"""
